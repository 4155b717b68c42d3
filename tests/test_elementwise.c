/* Elementwise ops (unary, binary with broadcasting and promotion, clamp, where) against naive
 * double references computed here from the inputs' stored values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"
#include "support.h"

static const eng_dtype_t FLOATS[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};
#define NFLOATS 4
static const int64_t NO_DIMS[1] = {1}; /* the shape argument of 0-d tensors */

static void check_shape(const eng_tensor_t *t, const int64_t *shape, int ndim, eng_dtype_t dt) {
  cr_assert_eq(t->ndim, ndim, "ndim %d, want %d", t->ndim, ndim);
  for (int d = 0; d < ndim; d++)
    cr_assert_eq(t->shape[d], shape[d], "dim %d: %lld, want %lld", d, (long long)t->shape[d],
                 (long long)shape[d]);
  cr_assert_eq(t->dtype, dt, "dtype %s, want %s", eng_dtype_name(t->dtype), eng_dtype_name(dt));
  cr_assert(eng_tensor_is_contiguous(t), "output not contiguous");
}

static void check_close(const eng_tensor_t *out, const double *ref, int64_t n, eng_dtype_t dt,
                        const char *what) {
  double err = t_rel_err(out, ref, n);
  cr_assert(err <= t_tol(dt), "%s [%s]: rel err %g > %g", what, eng_dtype_name(dt), err, t_tol(dt));
}

static void check_exact(const eng_tensor_t *out, const double *ref, int64_t n, const char *what) {
  double *v = t_values(out);
  for (int64_t i = 0; i < n; i++)
    cr_assert(v[i] == ref[i] || (isnan(v[i]) && isnan(ref[i])), "%s: [%lld] = %.17g, want %.17g",
              what, (long long)i, v[i], ref[i]);
  free(v);
}

/* Row-major index into an input of shape in[0..in_n-1] broadcast to `out`, for output index i. */
static int64_t bidx(const int64_t *out, int on, int64_t i, const int64_t *in, int in_n) {
  int64_t idx = 0, mul = 1;
  for (int d = on - 1; d >= 0; d--) {
    int64_t c = i % out[d];
    i /= out[d];
    int k = d - (on - in_n);
    if (k < 0) continue;
    if (in[k] != 1) idx += c * mul;
    mul *= in[k];
  }
  return idx;
}

/* ---------------- unary ---------------- */

static double ref_unary(eng_unary_op_t op, double v) {
  switch (op) {
  case ENG_UNARY_NEG: return -v;
  case ENG_UNARY_ABS: return fabs(v);
  case ENG_UNARY_EXP: return exp(v);
  case ENG_UNARY_LOG: return log(v);
  case ENG_UNARY_SQRT: return sqrt(v);
  case ENG_UNARY_RSQRT: return 1 / sqrt(v);
  case ENG_UNARY_TANH: return tanh(v);
  case ENG_UNARY_SIGMOID: return 1 / (1 + exp(-v));
  case ENG_UNARY_SILU: return v / (1 + exp(-v));
  case ENG_UNARY_GELU: return 0.5 * v * (1 + erf(v / sqrt(2.0)));
  case ENG_UNARY_RELU: return v > 0 ? v : 0;
  case ENG_UNARY_SOFTPLUS: return v > 20 ? v : log1p(exp(v));
  default: return NAN;
  }
}

static int needs_positive(eng_unary_op_t op) {
  return op == ENG_UNARY_LOG || op == ENG_UNARY_SQRT || op == ENG_UNARY_RSQRT;
}

/* Runs op on x and compares with ref_unary of x's stored values. */
static void check_unary(eng_unary_op_t op, eng_tensor_t *x, const char *what) {
  eng_tensor_t *y = NULL;
  T_OK(eng_op_unary(op, x, &y));
  check_shape(y, x->shape, x->ndim, x->dtype);
  int64_t n = eng_tensor_numel(x);
  double *v = t_values(x);
  for (int64_t i = 0; i < n; i++) v[i] = ref_unary(op, v[i]);
  char msg[128];
  snprintf(msg, sizeof msg, "%s %s", eng_unary_name(op), what);
  if (eng_dtype_is_float(x->dtype))
    check_close(y, v, n, x->dtype, msg);
  else
    check_exact(y, v, n, msg);
  free(v);
  eng_tensor_release(y);
}

Test(elementwise, unary_names) {
  cr_assert_str_eq(eng_unary_name(ENG_UNARY_NEG), "neg");
  cr_assert_str_eq(eng_unary_name(ENG_UNARY_SOFTPLUS), "softplus");
  cr_assert_str_eq(eng_binary_name(ENG_BINARY_MAXIMUM), "maximum");
  cr_assert_str_eq(eng_binary_name(ENG_BINARY_GE), "ge");
}

Test(elementwise, unary_float_shapes) {
  static const int64_t shapes[][2] = {{1, 1}, {7, 1}, {33, 5}, {1023, 1}, {3, 333}};
  static const int ndims[] = {1, 1, 2, 1, 2};
  for (int k = 0; k < NFLOATS; k++)
    for (int op = 0; op < ENG_UNARY_COUNT; op++)
      for (int s = 0; s < 5; s++) {
        double lo = needs_positive(op) ? 0.05 : -4, hi = 4;
        eng_tensor_t *x = t_rand_tensor(shapes[s], ndims[s], FLOATS[k], 100 + op * 7 + s, lo, hi);
        check_unary(op, x, "contiguous");
        eng_tensor_release(x);
      }
}

Test(elementwise, unary_scalar_and_views) {
  for (int k = 0; k < NFLOATS; k++)
    for (int op = 0; op < ENG_UNARY_COUNT; op++) {
      double lo = needs_positive(op) ? 0.05 : -4;
      eng_tensor_t *s = t_rand_tensor(NO_DIMS, 0, FLOATS[k], 7 + op, lo, 4);
      check_unary(op, s, "0-d");
      /* transposed [7,33] -> [33,7] */
      int64_t shape[2] = {7, 33};
      eng_tensor_t *base = t_rand_tensor(shape, 2, FLOATS[k], 11 + op, lo, 4), *tv = NULL,
                   *nv = NULL, *ev = NULL, *row = NULL;
      T_OK(eng_tensor_transpose(base, 0, 1, &tv));
      check_unary(op, tv, "transposed");
      /* narrowed columns 3..19 */
      T_OK(eng_tensor_narrow(base, 1, 3, 17, &nv));
      check_unary(op, nv, "narrowed");
      /* one row expanded to [5,33] */
      T_OK(eng_tensor_narrow(base, 0, 2, 1, &row));
      int64_t eshape[2] = {5, 33};
      T_OK(eng_tensor_expand(row, eshape, 2, &ev));
      check_unary(op, ev, "expanded");
      eng_tensor_release(s);
      eng_tensor_release(base);
      eng_tensor_release(tv);
      eng_tensor_release(nv);
      eng_tensor_release(row);
      eng_tensor_release(ev);
    }
}

Test(elementwise, unary_large_parallel) {
  int64_t shape[2] = {317, 331}; /* over the threading threshold */
  eng_tensor_t *x = t_rand_tensor(shape, 2, ENG_F32, 5, -3, 3), *t = NULL;
  check_unary(ENG_UNARY_EXP, x, "large");
  check_unary(ENG_UNARY_GELU, x, "large");
  T_OK(eng_tensor_transpose(x, 0, 1, &t));
  check_unary(ENG_UNARY_TANH, t, "large transposed");
  eng_tensor_release(t);
  eng_tensor_release(x);
  eng_tensor_t *h = t_rand_tensor(shape, 2, ENG_BF16, 6, -3, 3);
  check_unary(ENG_UNARY_SILU, h, "large bf16");
  eng_tensor_release(h);
}

Test(elementwise, unary_special_values) {
  double v[6] = {NAN, INFINITY, -INFINITY, 25.0, -25.0, -0.0};
  int64_t shape[1] = {6};
  eng_tensor_t *x = t_tensor(v, shape, 1, ENG_F32), *y = NULL;
  T_OK(eng_op_unary(ENG_UNARY_RELU, x, &y));
  double *r = t_values(y);
  cr_assert(isnan(r[0]), "relu keeps NaN");
  cr_assert(r[1] == INFINITY && r[2] == 0 && r[3] == 25 && r[4] == 0);
  free(r);
  eng_tensor_release(y);
  T_OK(eng_op_unary(ENG_UNARY_SOFTPLUS, x, &y));
  r = t_values(y);
  cr_assert(r[3] == 25.0f, "softplus is linear above 20, got %.9g", r[3]);
  cr_assert(r[4] > 0 && r[4] < 1e-10);
  free(r);
  eng_tensor_release(y);
  T_OK(eng_op_unary(ENG_UNARY_SIGMOID, x, &y));
  r = t_values(y);
  cr_assert(r[1] == 1 && r[2] == 0, "sigmoid saturates cleanly");
  free(r);
  eng_tensor_release(y);
  eng_tensor_release(x);
}

Test(elementwise, unary_integers) {
  static const eng_dtype_t ints[] = {ENG_I32, ENG_I64};
  int64_t shape[2] = {9, 13};
  for (int k = 0; k < 2; k++) {
    eng_tensor_t *x = t_rand_tensor(shape, 2, ints[k], 3 + k, -1000, 1000), *t = NULL;
    check_unary(ENG_UNARY_NEG, x, "int");
    check_unary(ENG_UNARY_ABS, x, "int");
    check_unary(ENG_UNARY_RELU, x, "int");
    T_OK(eng_tensor_transpose(x, 0, 1, &t));
    check_unary(ENG_UNARY_NEG, t, "int transposed");
    eng_tensor_release(t);
    eng_tensor_release(x);
  }
  eng_tensor_t *u = t_rand_tensor(shape, 2, ENG_U8, 4, 0, 255);
  check_unary(ENG_UNARY_ABS, u, "u8");
  check_unary(ENG_UNARY_RELU, u, "u8");
  eng_tensor_release(u);
}

Test(elementwise, unary_errors) {
  int64_t shape[1] = {4};
  eng_tensor_t *i = t_rand_tensor(shape, 1, ENG_I64, 1, -5, 5),
               *u = t_rand_tensor(shape, 1, ENG_U8, 2, 0, 9);
  eng_tensor_t *y = NULL;
  T_FAILS(eng_op_unary(ENG_UNARY_TANH, i, &y), ENG_ERR_DTYPE,
          "tanh: expected a floating dtype, got i64");
  T_FAILS(eng_op_unary(ENG_UNARY_EXP, u, &y), ENG_ERR_DTYPE,
          "exp: expected a floating dtype, got u8");
  T_FAILS(eng_op_unary(ENG_UNARY_NEG, u, &y), ENG_ERR_DTYPE,
          "neg: not defined for the unsigned dtype u8");
  T_FAILS(eng_op_unary(ENG_UNARY_COUNT, i, &y), ENG_ERR_ARG, "unknown op");
  T_FAILS(eng_op_unary(ENG_UNARY_EXP, NULL, &y), ENG_ERR_ARG, "exp: input 1 is missing");
  cr_assert_null(y);
  eng_tensor_release(i);
  eng_tensor_release(u);
}

/* ---------------- binary ---------------- */

static double ref_binary(eng_binary_op_t op, double x, double y) {
  switch (op) {
  case ENG_BINARY_ADD: return x + y;
  case ENG_BINARY_SUB: return x - y;
  case ENG_BINARY_MUL: return x * y;
  case ENG_BINARY_DIV: return x / y;
  case ENG_BINARY_POW: return pow(x, y);
  case ENG_BINARY_MAXIMUM: return isnan(x) || isnan(y) ? NAN : x > y ? x : y;
  case ENG_BINARY_MINIMUM: return isnan(x) || isnan(y) ? NAN : x < y ? x : y;
  case ENG_BINARY_EQ: return x == y;
  case ENG_BINARY_NE: return x != y;
  case ENG_BINARY_LT: return x < y;
  case ENG_BINARY_LE: return x <= y;
  case ENG_BINARY_GT: return x > y;
  case ENG_BINARY_GE: return x >= y;
  default: return NAN;
  }
}

static int is_cmp(eng_binary_op_t op) { return op >= ENG_BINARY_EQ; }

/* Runs a op b and checks against ref_binary over the broadcast of the stored values. */
static void check_binary(eng_binary_op_t op, eng_tensor_t *a, eng_tensor_t *b, eng_dtype_t want_dt,
                         const char *what) {
  eng_tensor_t *y = NULL;
  T_OK(eng_op_binary(op, a, b, &y));
  int64_t shape[ENG_MAX_DIMS] = {0};
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int d = 0; d < nd; d++) {
    int ka = d - (nd - a->ndim), kb = d - (nd - b->ndim);
    int64_t sa = ka >= 0 ? a->shape[ka] : 1, sb = kb >= 0 ? b->shape[kb] : 1;
    shape[d] = sa == 1 ? sb : sa;
  }
  check_shape(y, shape, nd, want_dt);
  int64_t n = t_numel(shape, nd);
  double *va = t_values(a), *vb = t_values(b), *ref = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++)
    ref[i] = ref_binary(op, va[bidx(shape, nd, i, a->shape, a->ndim)],
                        vb[bidx(shape, nd, i, b->shape, b->ndim)]);
  char msg[160];
  snprintf(msg, sizeof msg, "%s %s (%s, %s)", eng_binary_name(op), what, eng_dtype_name(a->dtype),
           eng_dtype_name(b->dtype));
  /* maximum/minimum pick one input, so they are exact like the integer ops and comparisons */
  int exact = !eng_dtype_is_float(want_dt) || op == ENG_BINARY_MAXIMUM || op == ENG_BINARY_MINIMUM;
  if (exact)
    check_exact(y, ref, n, msg);
  else
    check_close(y, ref, n, want_dt, msg);
  free(va);
  free(vb);
  free(ref);
  eng_tensor_release(y);
}

/* Integer-valued float inputs so that the comparisons see ties. */
static eng_tensor_t *int_valued(const int64_t *shape, int ndim, eng_dtype_t dt, uint64_t seed) {
  int64_t n = t_numel(shape, ndim);
  double *v = malloc(sizeof(double) * (size_t)n);
  t_random(v, n, seed, -3, 3);
  for (int64_t i = 0; i < n; i++) v[i] = floor(v[i]);
  eng_tensor_t *t = t_tensor(v, shape, ndim, dt);
  free(v);
  return t;
}

static eng_tensor_t *binary_input(eng_binary_op_t op, int side, const int64_t *shape, int ndim,
                                  eng_dtype_t dt, uint64_t seed) {
  if (is_cmp(op)) return int_valued(shape, ndim, dt, seed);
  if (op == ENG_BINARY_POW)
    return side == 0 ? t_rand_tensor(shape, ndim, dt, seed, 0.5, 2)
                     : t_rand_tensor(shape, ndim, dt, seed, -2, 2);
  if (op == ENG_BINARY_DIV && side == 1) return t_rand_tensor(shape, ndim, dt, seed, 0.5, 2.5);
  return t_rand_tensor(shape, ndim, dt, seed, -2, 2);
}

Test(elementwise, binary_float_broadcasting) {
  /* pairs of shapes: same, [3,1,5] with [4,1], scalar with [7], [1023] with [1], rows + bias */
  static const int64_t sa[][3] = {{33, 7}, {3, 1, 5}, {0}, {1023}, {5, 33}, {1}};
  static const int64_t sb[][3] = {{33, 7}, {4, 1}, {7}, {1}, {33}, {7, 1}};
  static const int na[] = {2, 3, 0, 1, 2, 1}, nb[] = {2, 2, 1, 1, 1, 2};
  for (int k = 0; k < NFLOATS; k++)
    for (int op = 0; op < ENG_BINARY_COUNT; op++)
      for (int s = 0; s < 6; s++) {
        eng_dtype_t dt = FLOATS[k];
        eng_tensor_t *a = binary_input(op, 0, sa[s], na[s], dt, 1000 + 31 * op + s);
        eng_tensor_t *b = binary_input(op, 1, sb[s], nb[s], dt, 2000 + 31 * op + s);
        check_binary(op, a, b, is_cmp(op) ? ENG_U8 : dt, "broadcast");
        if (op != ENG_BINARY_POW) /* the exponents would become (negative) bases */
          check_binary(op, b, a, is_cmp(op) ? ENG_U8 : dt, "broadcast swapped");
        eng_tensor_release(a);
        eng_tensor_release(b);
      }
}

Test(elementwise, binary_views) {
  for (int k = 0; k < NFLOATS; k++)
    for (int op = 0; op < ENG_BINARY_COUNT; op++) {
      eng_dtype_t dt = FLOATS[k];
      int64_t s1[2] = {9, 17}, s2[2] = {17, 9}, s3[1] = {9};
      eng_tensor_t *a = binary_input(op, 0, s1, 2, dt, 3 + op),
                   *b = binary_input(op, 1, s2, 2, dt, 4 + op);
      eng_tensor_t *c = binary_input(op, 1, s3, 1, dt, 5 + op);
      eng_tensor_t *bt = NULL, *an = NULL, *ce = NULL, *cu = NULL;
      T_OK(eng_tensor_transpose(b, 0, 1, &bt)); /* [9,17] with strides (1,9) */
      check_binary(op, a, bt, is_cmp(op) ? ENG_U8 : dt, "a + transposed b");
      if (op != ENG_BINARY_POW) check_binary(op, bt, a, is_cmp(op) ? ENG_U8 : dt, "transposed + a");
      T_OK(eng_tensor_narrow(a, 1, 2, 9, &an)); /* [9,9] strided rows */
      T_OK(eng_tensor_unsqueeze(c, 1, &cu));    /* [9,1] column */
      int64_t es[2] = {9, 9};
      T_OK(eng_tensor_expand(cu, es, 2, &ce));
      check_binary(op, an, ce, is_cmp(op) ? ENG_U8 : dt, "narrowed + expanded");
      check_binary(op, an, cu, is_cmp(op) ? ENG_U8 : dt, "narrowed + column");
      eng_tensor_release(a);
      eng_tensor_release(b);
      eng_tensor_release(c);
      eng_tensor_release(bt);
      eng_tensor_release(an);
      eng_tensor_release(ce);
      eng_tensor_release(cu);
    }
}

Test(elementwise, binary_large_parallel) {
  int64_t s1[2] = {301, 257}, s2[1] = {257}, s3[2] = {301, 1};
  eng_tensor_t *a = t_rand_tensor(s1, 2, ENG_F32, 1, -2, 2),
               *b = t_rand_tensor(s2, 1, ENG_F32, 2, -2, 2);
  eng_tensor_t *c = t_rand_tensor(s3, 2, ENG_F32, 3, -2, 2),
               *d = t_rand_tensor(s1, 2, ENG_F32, 4, -2, 2);
  check_binary(ENG_BINARY_ADD, a, d, ENG_F32, "large same shape");
  check_binary(ENG_BINARY_MUL, a, b, ENG_F32, "large row broadcast");
  check_binary(ENG_BINARY_SUB, a, c, ENG_F32, "large column broadcast");
  check_binary(ENG_BINARY_LT, a, b, ENG_U8, "large compare");
  eng_tensor_t *h = t_rand_tensor(s1, 2, ENG_F16, 5, -2, 2);
  check_binary(ENG_BINARY_ADD, h, h, ENG_F16, "large f16");
  eng_tensor_release(a);
  eng_tensor_release(b);
  eng_tensor_release(c);
  eng_tensor_release(d);
  eng_tensor_release(h);
}

Test(elementwise, binary_integers) {
  static const eng_dtype_t ints[] = {ENG_I32, ENG_I64, ENG_U8};
  int64_t s1[2] = {7, 11}, s2[1] = {11};
  for (int k = 0; k < 3; k++) {
    eng_dtype_t dt = ints[k];
    double lo = dt == ENG_U8 ? 0 : -100, hi = dt == ENG_U8 ? 15 : 100;
    eng_tensor_t *a = t_rand_tensor(s1, 2, dt, 10 + k, lo, hi),
                 *b = t_rand_tensor(s2, 1, dt, 20 + k, lo, hi);
    static const eng_binary_op_t ops[] = {ENG_BINARY_ADD,     ENG_BINARY_SUB,     ENG_BINARY_MUL,
                                          ENG_BINARY_MAXIMUM, ENG_BINARY_MINIMUM, ENG_BINARY_EQ,
                                          ENG_BINARY_NE,      ENG_BINARY_LT,      ENG_BINARY_LE,
                                          ENG_BINARY_GT,      ENG_BINARY_GE};
    for (int o = 0; o < 11; o++) {
      if (dt == ENG_U8 && ops[o] == ENG_BINARY_SUB) continue; /* wraps: checked separately */
      check_binary(ops[o], a, b, is_cmp(ops[o]) ? ENG_U8 : dt, "int");
    }
    /* integer division is true division in f32 */
    eng_tensor_t *bp = t_rand_tensor(s2, 1, dt, 30 + k, 1, 9);
    check_binary(ENG_BINARY_DIV, a, bp, ENG_F32, "int div");
    /* pow with non-negative exponents is exact */
    eng_tensor_t *base =
        t_rand_tensor(s1, 2, dt, 40 + k, dt == ENG_U8 ? 0 : -6, dt == ENG_U8 ? 4 : 6);
    eng_tensor_t *ex = t_rand_tensor(s2, 1, dt, 50 + k, 0, 5);
    check_binary(ENG_BINARY_POW, base, ex, dt, "int pow");
    eng_tensor_release(a);
    eng_tensor_release(b);
    eng_tensor_release(bp);
    eng_tensor_release(base);
    eng_tensor_release(ex);
  }
}

static eng_tensor_t *i64_tensor(const int64_t *v, int64_t n) {
  eng_tensor_t *t = NULL;
  T_OK(eng_tensor_empty(&n, 1, ENG_I64, ENG_CPU_DEVICE, &t));
  memcpy(eng_tensor_data(t), v, sizeof(int64_t) * (size_t)n);
  return t;
}

Test(elementwise, binary_integers_exact_and_wrapping) {
  /* values beyond 2^53: going through double would lose the low bits */
  int64_t va[3] = {(1LL << 60) + 1, INT64_MAX, -(1LL << 62) - 7};
  int64_t vb[3] = {(1LL << 60) + 3, 1, 3};
  eng_tensor_t *a = i64_tensor(va, 3), *b = i64_tensor(vb, 3), *y = NULL;
  T_OK(eng_op_binary(ENG_BINARY_ADD, a, b, &y));
  const int64_t *r = eng_tensor_data(y);
  cr_assert_eq(r[0], (1LL << 61) + 4);
  cr_assert_eq(r[1], INT64_MIN, "add wraps like two's complement");
  eng_tensor_release(y);
  T_OK(eng_op_binary(ENG_BINARY_MUL, a, b, &y));
  r = eng_tensor_data(y);
  cr_assert_eq(r[2], (int64_t)((uint64_t)va[2] * 3u));
  eng_tensor_release(y);
  T_OK(eng_op_binary(ENG_BINARY_SUB, a, b, &y));
  r = eng_tensor_data(y);
  cr_assert_eq(r[0], -2);
  eng_tensor_release(y);
  T_OK(eng_op_binary(ENG_BINARY_MAXIMUM, a, b, &y));
  r = eng_tensor_data(y);
  cr_assert_eq(r[0], (1LL << 60) + 3);
  eng_tensor_release(y);
  /* u8 wraps mod 256 */
  double u1[2] = {3, 250}, u2[2] = {5, 10};
  int64_t s[1] = {2};
  eng_tensor_t *p = t_tensor(u1, s, 1, ENG_U8), *q = t_tensor(u2, s, 1, ENG_U8);
  T_OK(eng_op_binary(ENG_BINARY_SUB, p, q, &y));
  const uint8_t *ru = eng_tensor_data(y);
  cr_assert(ru[0] == 254 && ru[1] == 240);
  eng_tensor_release(y);
  T_OK(eng_op_binary(ENG_BINARY_ADD, p, q, &y));
  ru = eng_tensor_data(y);
  cr_assert(ru[0] == 8 && ru[1] == 4);
  eng_tensor_release(y);
  eng_tensor_release(p);
  eng_tensor_release(q);
  eng_tensor_release(a);
  eng_tensor_release(b);
}

Test(elementwise, binary_nan_propagation) {
  double va[3] = {NAN, 1, 2}, vb[3] = {1, NAN, 1};
  int64_t s[1] = {3};
  eng_tensor_t *a = t_tensor(va, s, 1, ENG_F32), *b = t_tensor(vb, s, 1, ENG_F32);
  check_binary(ENG_BINARY_MAXIMUM, a, b, ENG_F32, "nan");
  check_binary(ENG_BINARY_MINIMUM, a, b, ENG_F32, "nan");
  check_binary(ENG_BINARY_EQ, a, b, ENG_U8, "nan");
  check_binary(ENG_BINARY_NE, a, b, ENG_U8, "nan");
  eng_tensor_release(a);
  eng_tensor_release(b);
}

Test(elementwise, binary_promotion) {
  int64_t s1[2] = {4, 6}, s2[1] = {6};
  eng_tensor_t *f32 = t_rand_tensor(s1, 2, ENG_F32, 1, -2, 2),
               *i64 = t_rand_tensor(s2, 1, ENG_I64, 2, -9, 9);
  eng_tensor_t *f16 = t_rand_tensor(s1, 2, ENG_F16, 3, -2, 2),
               *bf16 = t_rand_tensor(s2, 1, ENG_BF16, 4, -2, 2);
  eng_tensor_t *i32 = t_rand_tensor(s1, 2, ENG_I32, 5, -9, 9),
               *u8 = t_rand_tensor(s2, 1, ENG_U8, 6, 1, 9);
  eng_tensor_t *f64 = t_rand_tensor(s2, 1, ENG_F64, 7, -2, 2);
  check_binary(ENG_BINARY_ADD, f32, i64, ENG_F32, "promote");
  check_binary(ENG_BINARY_MUL, f16, bf16, ENG_F32, "promote");
  check_binary(ENG_BINARY_SUB, i32, i64, ENG_I64, "promote");
  check_binary(ENG_BINARY_ADD, i32, u8, ENG_I32, "promote");
  check_binary(ENG_BINARY_DIV, i32, u8, ENG_F32, "promote");
  check_binary(ENG_BINARY_MUL, f16, f64, ENG_F64, "promote");
  check_binary(ENG_BINARY_GT, f32, i64, ENG_U8, "promote");
  eng_tensor_release(f32);
  eng_tensor_release(i64);
  eng_tensor_release(f16);
  eng_tensor_release(bf16);
  eng_tensor_release(i32);
  eng_tensor_release(u8);
  eng_tensor_release(f64);
}

/* Dispatches a registry op directly, as the binding and autograd may. */
static eng_status_t dispatch(eng_op_id_t id, eng_tensor_t **in, int n_in, eng_tensor_t **out) {
  eng_op_call_t call = {.id = id, .n_in = n_in, .in = in};
  eng_status_t st = eng_op_dispatch(&call);
  *out = call.out[0];
  return st;
}

Test(elementwise, binary_errors) {
  int64_t s1[2] = {2, 3}, s2[1] = {4}, s3[1] = {3};
  eng_tensor_t *a = t_rand_tensor(s1, 2, ENG_F32, 1, -1, 1),
               *b = t_rand_tensor(s2, 1, ENG_F32, 2, -1, 1);
  eng_tensor_t *c = t_rand_tensor(s3, 1, ENG_F64, 3, -1, 1), *y = NULL;
  T_FAILS(eng_op_binary(ENG_BINARY_ADD, a, b, &y), ENG_ERR_SHAPE, "[2,3]");
  cr_assert(strstr(eng_last_error(), "add") && strstr(eng_last_error(), "[4]"), "%s",
            eng_last_error());
  T_FAILS(eng_op_binary(ENG_BINARY_ADD, a, NULL, &y), ENG_ERR_ARG, "add: input 2 is missing");
  T_FAILS(eng_op_binary(ENG_BINARY_COUNT, a, b, &y), ENG_ERR_ARG, "unknown op");
  /* the rule itself insists on one dtype and on float division */
  eng_tensor_t *in[2] = {a, c};
  T_FAILS(dispatch(ENG_OP_MUL, in, 2, &y), ENG_ERR_DTYPE,
          "mul: inputs have different dtypes f32 and f64");
  cr_assert_null(y);
  eng_tensor_t *i1 = t_rand_tensor(s3, 1, ENG_I64, 4, 1, 9),
               *i2 = t_rand_tensor(s3, 1, ENG_I64, 5, 1, 9);
  eng_tensor_t *iin[2] = {i1, i2};
  T_FAILS(dispatch(ENG_OP_DIV, iin, 2, &y), ENG_ERR_DTYPE, "div: i64 inputs must be converted");
  /* integer pow with a negative exponent */
  double ve[3] = {1, -2, 3};
  eng_tensor_t *e = t_tensor(ve, s3, 1, ENG_I64);
  T_FAILS(eng_op_binary(ENG_BINARY_POW, i1, e, &y), ENG_ERR_ARG,
          "pow: negative exponent with i64 inputs");
  cr_assert_null(y);
  eng_tensor_release(a);
  eng_tensor_release(b);
  eng_tensor_release(c);
  eng_tensor_release(i1);
  eng_tensor_release(i2);
  eng_tensor_release(e);
}

/* ---------------- clamp ---------------- */

static void check_clamp(eng_tensor_t *x, int has_lo, double lo, int has_hi, double hi,
                        const char *what) {
  eng_tensor_t *y = NULL;
  T_OK(eng_op_clamp(x, has_lo, lo, has_hi, hi, &y));
  check_shape(y, x->shape, x->ndim, x->dtype);
  int64_t n = eng_tensor_numel(x);
  double *v = t_values(x);
  int is_int = !eng_dtype_is_float(x->dtype);
  double l = is_int ? ceil(lo) : lo, h = is_int ? floor(hi) : hi;
  if (x->dtype == ENG_U8) {
    l = l < 0 ? 0 : l > 255 ? 255 : l;
    h = h < 0 ? 0 : h > 255 ? 255 : h;
  }
  for (int64_t i = 0; i < n; i++) {
    if (isnan(v[i])) continue;
    if (has_lo && v[i] < l) v[i] = l;
    if (has_hi && v[i] > h) v[i] = h;
  }
  if (eng_dtype_is_float(x->dtype)) {
    /* the bound itself is stored in x's dtype */
    eng_tensor_t *r = t_tensor(v, x->shape, x->ndim, x->dtype);
    double *rv = t_values(r);
    check_exact(y, rv, n, what);
    free(rv);
    eng_tensor_release(r);
  } else {
    check_exact(y, v, n, what);
  }
  free(v);
  eng_tensor_release(y);
}

Test(elementwise, clamp_all_dtypes) {
  int64_t shape[2] = {13, 7};
  for (int k = 0; k < NFLOATS; k++) {
    eng_tensor_t *x = t_rand_tensor(shape, 2, FLOATS[k], 9 + k, -3, 3), *t = NULL;
    check_clamp(x, 1, -1.25, 1, 0.75, "both");
    check_clamp(x, 1, 0.3, 0, 0, "lo only");
    check_clamp(x, 0, 0, 1, -0.4, "hi only");
    check_clamp(x, 1, 1, 1, -1, "lo > hi gives hi");
    T_OK(eng_tensor_transpose(x, 0, 1, &t));
    check_clamp(t, 1, -0.5, 1, 0.5, "transposed");
    eng_tensor_release(t);
    eng_tensor_release(x);
  }
  eng_tensor_t *i = t_rand_tensor(shape, 2, ENG_I32, 1, -50, 50);
  check_clamp(i, 1, -2.5, 1, 3.7, "i32 fractional bounds");
  check_clamp(i, 1, -1e30, 1, 7, "i32 huge bound");
  eng_tensor_release(i);
  eng_tensor_t *l = t_rand_tensor(shape, 2, ENG_I64, 2, -50, 50);
  check_clamp(l, 0, 0, 1, 0, "i64 hi only");
  eng_tensor_release(l);
  eng_tensor_t *u = t_rand_tensor(shape, 2, ENG_U8, 3, 0, 255);
  check_clamp(u, 1, -5, 1, 300, "u8 saturated bounds");
  check_clamp(u, 1, 20, 1, 200, "u8");
  eng_tensor_release(u);
  int64_t big[1] = {70001};
  eng_tensor_t *g = t_rand_tensor(big, 1, ENG_F32, 4, -3, 3);
  check_clamp(g, 1, -1, 1, 1, "large");
  eng_tensor_release(g);
}

Test(elementwise, clamp_nan_and_errors) {
  double v[3] = {NAN, -5, 5};
  int64_t s[1] = {3};
  eng_tensor_t *x = t_tensor(v, s, 1, ENG_F32), *y = NULL;
  check_clamp(x, 1, -1, 1, 1, "nan");
  T_FAILS(eng_op_clamp(x, 0, 0, 0, 0, &y), ENG_ERR_ARG, "clamp: give at least one of lo and hi");
  T_FAILS(eng_op_clamp(x, 1, NAN, 0, 0, &y), ENG_ERR_ARG, "clamp: lo is NaN");
  T_FAILS(eng_op_clamp(x, 1, 0, 1, NAN, &y), ENG_ERR_ARG, "clamp: hi is NaN");
  cr_assert_null(y);
  eng_tensor_release(x);
}

/* ---------------- where ---------------- */

static void check_where(eng_tensor_t *c, eng_tensor_t *a, eng_tensor_t *b, eng_dtype_t want,
                        const char *what) {
  eng_tensor_t *y = NULL;
  T_OK(eng_op_where(c, a, b, &y));
  const eng_tensor_t *ts[3] = {c, a, b};
  int64_t shape[ENG_MAX_DIMS] = {0};
  int nd = 0;
  for (int k = 0; k < 3; k++) nd = ts[k]->ndim > nd ? ts[k]->ndim : nd;
  for (int d = 0; d < nd; d++) {
    shape[d] = 1;
    for (int k = 0; k < 3; k++) {
      int j = d - (nd - ts[k]->ndim);
      if (j >= 0 && ts[k]->shape[j] != 1) shape[d] = ts[k]->shape[j];
    }
  }
  check_shape(y, shape, nd, want);
  int64_t n = t_numel(shape, nd);
  double *vc = t_values(c), *va = t_values(a), *vb = t_values(b),
         *ref = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    double cv = vc[bidx(shape, nd, i, c->shape, c->ndim)];
    ref[i] = cv != 0 ? va[bidx(shape, nd, i, a->shape, a->ndim)]
                     : vb[bidx(shape, nd, i, b->shape, b->ndim)];
  }
  check_exact(y, ref, n, what);
  free(vc);
  free(va);
  free(vb);
  free(ref);
  eng_tensor_release(y);
}

static eng_tensor_t *mask(const int64_t *shape, int ndim, eng_dtype_t dt, uint64_t seed) {
  int64_t n = t_numel(shape, ndim);
  double *v = malloc(sizeof(double) * (size_t)n);
  t_random(v, n, seed, 0, 1);
  for (int64_t i = 0; i < n; i++) v[i] = v[i] < 0.5 ? 0 : (i % 3 == 0 ? -2.5 : 1);
  eng_tensor_t *t = t_tensor(v, shape, ndim, dt);
  free(v);
  return t;
}

Test(elementwise, where_broadcast_dtypes) {
  int64_t sc[3] = {3, 1, 5}, sa[2] = {4, 1};
  static const eng_dtype_t all[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16, ENG_I32, ENG_I64, ENG_U8};
  for (int k = 0; k < 7; k++) {
    eng_dtype_t dt = all[k];
    eng_tensor_t *c = mask(sc, 3, all[(k + 3) % 7], 10 + k);
    eng_tensor_t *a = t_rand_tensor(sa, 2, dt, 20 + k, 0, 100),
                 *b = t_rand_tensor(NO_DIMS, 0, dt, 30 + k, 0, 100);
    check_where(c, a, b, dt, "broadcast");
    check_where(c, b, a, dt, "broadcast swapped");
    eng_tensor_release(c);
    eng_tensor_release(a);
    eng_tensor_release(b);
  }
  /* views, NaN as true, promotion of a and b */
  int64_t s2[2] = {6, 9};
  double nanv[2] = {NAN, 0};
  int64_t s1[1] = {2};
  eng_tensor_t *cn = t_tensor(nanv, s1, 1, ENG_F32), *cu = NULL, *ce = NULL;
  T_OK(eng_tensor_unsqueeze(cn, 1, &cu));
  int64_t es[2] = {2, 9};
  T_OK(eng_tensor_expand(cu, es, 2, &ce));
  eng_tensor_t *a = t_rand_tensor(s2, 2, ENG_F32, 1, -1, 1), *an = NULL,
               *b = t_rand_tensor(s2, 2, ENG_F64, 2, -1, 1);
  eng_tensor_t *bn = NULL;
  T_OK(eng_tensor_narrow(a, 0, 1, 2, &an));
  T_OK(eng_tensor_narrow(b, 0, 3, 2, &bn));
  check_where(ce, an, bn, ENG_F64, "views + promotion");
  int64_t big[2] = {257, 300}, brow[1] = {300};
  eng_tensor_t *gc = mask(big, 2, ENG_U8, 3), *ga = t_rand_tensor(big, 2, ENG_F32, 4, -1, 1);
  eng_tensor_t *gb = t_rand_tensor(brow, 1, ENG_F32, 5, -1, 1);
  check_where(gc, ga, gb, ENG_F32, "large");
  eng_tensor_release(gc);
  eng_tensor_release(ga);
  eng_tensor_release(gb);
  eng_tensor_release(cn);
  eng_tensor_release(cu);
  eng_tensor_release(ce);
  eng_tensor_release(a);
  eng_tensor_release(an);
  eng_tensor_release(b);
  eng_tensor_release(bn);
}

Test(elementwise, where_errors) {
  int64_t s1[1] = {3}, s2[1] = {4};
  eng_tensor_t *c = mask(s1, 1, ENG_U8, 1), *a = t_rand_tensor(s1, 1, ENG_F32, 2, 0, 1);
  eng_tensor_t *b = t_rand_tensor(s2, 1, ENG_F32, 3, 0, 1),
               *d = t_rand_tensor(s1, 1, ENG_F64, 4, 0, 1), *y = NULL;
  T_FAILS(eng_op_where(c, a, b, &y), ENG_ERR_SHAPE, "[4]");
  T_FAILS(eng_op_where(c, a, NULL, &y), ENG_ERR_ARG, "where: input 3 is missing");
  T_FAILS(eng_op_where(NULL, a, a, &y), ENG_ERR_ARG, "where: input 1 is missing");
  eng_tensor_t *in[3] = {c, a, d};
  T_FAILS(dispatch(ENG_OP_WHERE, in, 3, &y), ENG_ERR_DTYPE,
          "where: inputs have different dtypes f32 and f64");
  cr_assert_null(y);
  eng_tensor_release(c);
  eng_tensor_release(a);
  eng_tensor_release(b);
  eng_tensor_release(d);
}

/* ---------------- outputs preset by the caller (in-place ops) ---------------- */

Test(elementwise, preset_outputs) {
  int64_t s[2] = {3, 4}, st[2] = {4, 3};
  eng_tensor_t *a = t_rand_tensor(s, 2, ENG_F32, 1, -1, 1),
               *b = t_rand_tensor(s, 2, ENG_F32, 2, -1, 1);
  double *va = t_values(a), *vb = t_values(b);
  for (int i = 0; i < 12; i++) va[i] += vb[i];
  /* a += b: the output is a itself */
  eng_tensor_t *in[2] = {a, b};
  eng_op_call_t call = {.id = ENG_OP_ADD, .n_in = 2, .in = in, .n_out = 1, .out = {a}};
  T_OK(eng_op_dispatch(&call));
  cr_assert_eq(call.out[0], a);
  check_close(a, va, 12, ENG_F32, "in-place add");
  /* a non-contiguous or mis-shaped output is refused rather than written wrongly */
  eng_tensor_t *o = t_rand_tensor(st, 2, ENG_F32, 3, -1, 1), *ot = NULL;
  T_OK(eng_tensor_transpose(o, 0, 1, &ot));
  eng_op_call_t c2 = {.id = ENG_OP_MUL, .n_in = 2, .in = in, .n_out = 1, .out = {ot}};
  T_FAILS(eng_op_dispatch(&c2), ENG_ERR_LAYOUT,
          "mul: the output must be a contiguous f32 [3,4], got a non-contiguous f32 [3,4]");
  eng_op_call_t c3 = {.id = ENG_OP_MUL, .n_in = 2, .in = in, .n_out = 1, .out = {o}};
  T_FAILS(eng_op_dispatch(&c3), ENG_ERR_SHAPE,
          "mul: the output must be a contiguous f32 [3,4], got a f32 [4,3]");
  eng_op_call_t c4 = {.id = ENG_OP_LT, .n_in = 2, .in = in, .n_out = 1, .out = {b}};
  T_FAILS(eng_op_dispatch(&c4), ENG_ERR_SHAPE,
          "lt: the output must be a contiguous u8 [3,4], got a f32 [3,4]");
  free(va);
  free(vb);
  eng_tensor_release(a);
  eng_tensor_release(b);
  eng_tensor_release(o);
  eng_tensor_release(ot);
}
