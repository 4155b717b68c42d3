/* linear on the CPU against naive loops: y[r, j] = act(sum_p x[r, p] W[j, p] + b[j]) with act none,
 * relu or gelu in its tanh approximation (the exact erf form would miss the f64 tolerance by
 * orders of magnitude), every float dtype, 1-D/2-D/3-D x, transposed and strided views, empty
 * sizes, dtype promotion, each error, and engine.F.linear's options from Lua. */
#include <lua.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static const eng_dtype_t FLOATS[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};

static double activate(double v, int act) {
  if (act == ENG_ACT_RELU) return v < 0 ? 0 : v;
  if (act == ENG_ACT_GELU_TANH) return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  return v;
}

/* The expected result from the (already rounded) input values; x is [rows, k] row-major. */
static double *reference(const eng_tensor_t *x, const eng_tensor_t *w, const eng_tensor_t *b, int act) {
  int64_t n = w->shape[0], k = w->shape[1], rows = 1;
  for (int d = 0; d < x->ndim - 1; d++) rows *= x->shape[d];
  double *xv = t_values(x), *wv = t_values(w), *bv = b ? t_values(b) : NULL;
  double *out = calloc((size_t)(rows * n + 1), sizeof(double));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < n; j++) {
      double s = bv ? bv[j] : 0;
      for (int64_t p = 0; p < k; p++) s += xv[r * k + p] * wv[j * k + p];
      out[r * n + j] = activate(s, act);
    }
  free(xv);
  free(wv);
  free(bv);
  return out;
}

/* Runs eng_op_linear and checks dtype, shape and values; releases nothing. */
static void check(eng_tensor_t *x, eng_tensor_t *w, eng_tensor_t *b, int act, const char *what) {
  eng_tensor_t *y = NULL;
  T_OK(eng_op_linear(x, w, b, act, &y));
  char sx[128], sy[128];
  cr_assert(y->ndim == x->ndim && y->shape[y->ndim - 1] == w->shape[0], "%s: x %s gave %s", what,
            ENG_SHAPE_STR(x, sx), ENG_SHAPE_STR(y, sy));
  for (int d = 0; d < x->ndim - 1; d++) cr_assert(y->shape[d] == x->shape[d], "%s: shape %s", what, ENG_SHAPE_STR(y, sy));
  cr_assert(y->dtype == x->dtype, "%s: dtype %s", what, eng_dtype_name(y->dtype));
  double *ref = reference(x, w, b, act);
  double err = t_rel_err(y, ref, eng_tensor_numel(y));
  cr_assert(err <= t_tol(y->dtype), "%s (%s, act %d): rel err %g > %g", what,
            eng_dtype_name(y->dtype), act, err, t_tol(y->dtype));
  free(ref);
  eng_tensor_release(y);
}

#define RAND(dt, seed, ...) \
  t_rand_tensor((const int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), dt, seed, -2, 2)

Test(linear, every_dtype_activation_and_bias) {
  for (size_t d = 0; d < sizeof FLOATS / sizeof FLOATS[0]; d++)
    for (int act = 0; act < ENG_ACT_COUNT; act++) {
      eng_dtype_t dt = FLOATS[d];
      eng_tensor_t *x = RAND(dt, 1, 7, 33), *w = RAND(dt, 2, 9, 33), *b = RAND(dt, 3, 9);
      check(x, w, b, act, "2-D with bias");
      check(x, w, NULL, act, "2-D without bias");
      eng_tensor_t *x3 = RAND(dt, 4, 2, 3, 33), *x1 = RAND(dt, 5, 33);
      check(x3, w, b, act, "3-D x");
      check(x1, w, b, act, "1-D x");
      eng_tensor_release(x);
      eng_tensor_release(w);
      eng_tensor_release(b);
      eng_tensor_release(x3);
      eng_tensor_release(x1);
    }
}

Test(linear, views) {
  for (size_t d = 0; d < sizeof FLOATS / sizeof FLOATS[0]; d++) {
    eng_dtype_t dt = FLOATS[d];
    eng_tensor_t *xb = RAND(dt, 10, 33, 7), *wb = RAND(dt, 11, 33, 9), *bb = RAND(dt, 12, 18);
    eng_tensor_t *xt, *wt, *bs, *xs;
    T_OK(eng_tensor_transpose(xb, 0, 1, &xt)); /* [7, 33], column-major */
    T_OK(eng_tensor_transpose(wb, 0, 1, &wt)); /* [9, 33] */
    T_OK(eng_tensor_slice(bb, 0, 0, 18, 2, &bs)); /* [9], stride 2 */
    T_OK(eng_tensor_slice(xb, 0, 0, 33, 3, &xs)); /* [11, 7], rows 3 apart */
    check(xt, wt, bs, ENG_ACT_GELU_TANH, "transposed x and W, strided bias");
    eng_tensor_t *w7 = RAND(dt, 13, 5, 7);
    check(xs, w7, NULL, ENG_ACT_RELU, "strided rows of x");
    eng_tensor_t *list[] = {xb, wb, bb, xt, wt, bs, xs, w7};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) eng_tensor_release(list[i]);
  }
}

Test(linear, empty_sizes) {
  eng_tensor_t *x = RAND(ENG_F32, 20, 4, 0), *w = RAND(ENG_F32, 21, 3, 0), *b = RAND(ENG_F32, 22, 3);
  check(x, w, b, ENG_ACT_RELU, "K = 0 gives act(bias)");
  check(x, w, NULL, ENG_ACT_GELU_TANH, "K = 0 without bias gives zeros");
  eng_tensor_t *x0 = RAND(ENG_F32, 23, 0, 5), *w0 = RAND(ENG_F32, 24, 3, 5), *wn = RAND(ENG_F32, 25, 0, 5);
  eng_tensor_t *y = NULL;
  T_OK(eng_op_linear(x0, w0, NULL, ENG_ACT_NONE, &y));
  cr_assert(y->ndim == 2 && y->shape[0] == 0 && y->shape[1] == 3, "no rows");
  eng_tensor_release(y);
  T_OK(eng_op_linear(w0, wn, NULL, ENG_ACT_NONE, &y));
  cr_assert(y->ndim == 2 && y->shape[0] == 3 && y->shape[1] == 0, "no outputs");
  eng_tensor_release(y);
  eng_tensor_t *list[] = {x, w, b, x0, w0, wn};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) eng_tensor_release(list[i]);
}

/* gelu here is the tanh form: at x = 2 it differs from the erf form by ~2e-4. */
Test(linear, gelu_is_the_tanh_approximation) {
  const double one = 1, two = 2;
  eng_tensor_t *x = t_tensor(&two, (const int64_t[]){1, 1}, 2, ENG_F64);
  eng_tensor_t *w = t_tensor(&one, (const int64_t[]){1, 1}, 2, ENG_F64), *y = NULL;
  T_OK(eng_op_linear(x, w, NULL, ENG_ACT_GELU_TANH, &y));
  double v;
  T_OK(eng_tensor_get(y, (const int64_t[]){0, 0}, &v));
  double tanh_form = 0.5 * 2 * (1 + tanh(sqrt(2 / M_PI) * (2 + 0.044715 * 8)));
  double erf_form = 0.5 * 2 * (1 + erf(2 / sqrt(2)));
  cr_assert(fabs(v - tanh_form) < 1e-15 && fabs(v - erf_form) > 1e-5, "gelu(2) = %.17g", v);
  eng_tensor_release(x);
  eng_tensor_release(w);
  eng_tensor_release(y);
}

Test(linear, promotes_dtypes) {
  eng_tensor_t *x = RAND(ENG_F32, 30, 4, 6), *w = RAND(ENG_F64, 31, 3, 6), *b = RAND(ENG_BF16, 32, 3);
  eng_tensor_t *y = NULL, *x64 = NULL, *b64 = NULL;
  T_OK(eng_op_linear(x, w, b, ENG_ACT_NONE, &y));
  cr_assert(y->dtype == ENG_F64, "f32 x with f64 W gives %s", eng_dtype_name(y->dtype));
  T_OK(eng_tensor_to_dtype(x, ENG_F64, &x64));
  T_OK(eng_tensor_to_dtype(b, ENG_F64, &b64));
  double *ref = reference(x64, w, b64, ENG_ACT_NONE);
  cr_assert(t_rel_err(y, ref, 12) <= 1e-12, "promoted values");
  free(ref);
  eng_tensor_t *list[] = {x, w, b, y, x64, b64};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) eng_tensor_release(list[i]);
}

Test(linear, errors) {
  eng_tensor_t *x = RAND(ENG_F32, 40, 4, 3), *w = RAND(ENG_F32, 41, 5, 2), *w1 = RAND(ENG_F32, 42, 3),
               *w3 = RAND(ENG_F32, 43, 5, 3), *b4 = RAND(ENG_F32, 44, 4), *y = NULL;
  eng_tensor_t *xi = NULL, *wi = NULL;
  T_OK(eng_tensor_to_dtype(x, ENG_I32, &xi));
  T_OK(eng_tensor_to_dtype(w3, ENG_I64, &wi));
  T_FAILS(eng_op_linear(x, w, NULL, ENG_ACT_NONE, &y), ENG_ERR_SHAPE, "[4,3]");
  T_FAILS(eng_op_linear(x, w1, NULL, ENG_ACT_NONE, &y), ENG_ERR_SHAPE, "2-D");
  T_FAILS(eng_op_linear(x, w3, b4, ENG_ACT_NONE, &y), ENG_ERR_SHAPE, "bias must be [5]");
  T_FAILS(eng_op_linear(x, w3, NULL, 7, &y), ENG_ERR_ARG, "unknown activation 7");
  T_FAILS(eng_op_linear(xi, wi, NULL, ENG_ACT_NONE, &y), ENG_ERR_DTYPE, "floating");
  T_FAILS(eng_op_linear(NULL, w3, NULL, ENG_ACT_NONE, &y), ENG_ERR_ARG, "missing");
  cr_assert(y == NULL, "no result on failure");
  eng_tensor_t *list[] = {x, w, w1, w3, b4, xi, wi};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) eng_tensor_release(list[i]);
}

/* engine.F.linear(x, W[, b][, {act = ...}]) from Lua, against the same formulas written in Lua. */
Test(linear, lua_options) {
  eng_engine_t *e = eng_engine_new();
  cr_assert(e != NULL);
  int rc = eng_engine_run_string(e,
      "local F = engine.F\n"
      "local x = engine.tensor({{-1.5, 0.5, 2}, {0.25, -2, 1}}, {dtype = 'f64'})\n"
      "local W = engine.tensor({{1, -1, 0.5}, {0.5, 2, -1}}, {dtype = 'f64'})\n"
      "local b = engine.tensor({0.1, -0.2}, {dtype = 'f64'})\n"
      "local X, Wl, B = x:tolist(), W:tolist(), b:tolist()\n"
      "local function gelu(v) return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3))) end\n"
      "local function relu(v) return v < 0 and 0 or v end\n"
      "local function ref(act, bias)\n"
      "  local out = {}\n"
      "  for i = 1, 2 do out[i] = {}\n"
      "    for j = 1, 2 do local s = bias and B[j] or 0\n"
      "      for p = 1, 3 do s = s + X[i][p] * Wl[j][p] end\n"
      "      out[i][j] = act and act(s) or s end end\n"
      "  return out\n"
      "end\n"
      "local function same(got, want, what)\n"
      "  for i = 1, 2 do for j = 1, 2 do\n"
      "    assert(math.abs(got[i][j] - want[i][j]) < 1e-12, what .. ': ' .. got[i][j] .. ' vs ' .. want[i][j]) end end\n"
      "end\n"
      "same(F.linear(x, W, b, {act = 'relu'}):tolist(), ref(relu, true), 'relu with bias')\n"
      "same(F.linear(x, W, b, {act = 'gelu'}):tolist(), ref(gelu, true), 'gelu with bias')\n"
      "same(F.linear(x, W, {act = 'gelu'}):tolist(), ref(gelu, false), 'options in b\\'s place')\n"
      "same(F.linear(x, W, nil, {act = 'relu'}):tolist(), ref(relu, false), 'nil bias')\n"
      "same(F.linear(x, W, b, {act = 'none'}):tolist(), ref(nil, true), 'none')\n"
      "same(F.linear(x, W, b):tolist(), ref(nil, true), 'no options')\n"
      "local function fails(f, needle)\n"
      "  local ok, err = pcall(f)\n"
      "  assert(not ok and tostring(err):find(needle, 1, true), 'expected ' .. needle .. ', got ' .. tostring(err))\n"
      "end\n"
      "fails(function() return F.linear(x, W, b, {act = 'tanh'}) end, \"linear: unknown act 'tanh'\")\n"
      "fails(function() return F.linear(x, W, b, {act = 1}) end, 'act must be a string')\n"
      "fails(function() return F.linear(x, W, b, {activation = 'relu'}) end, \"unknown option 'activation'\")\n"
      "fails(function() return F.linear(x, W, b, 'relu') end, 'options table')\n"
      "fails(function() return F.linear(x, W, b, {}, 1) end, 'linear')\n",
      "linear_options");
  cr_assert(rc == 0, "%s", eng_engine_last_error(e));
  eng_engine_free(e);
}
