/* softmax, log_softmax, layer_norm, rms_norm and cross_entropy against naive double references
 * computed here from the inputs' stored values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static const eng_dtype_t FLOATS[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};
#define NFLOATS 4

static void check_close(const eng_tensor_t *y, const double *ref, int64_t n, eng_dtype_t dt,
                        const char *what) {
  cr_assert(eng_tensor_is_contiguous(y), "%s: output not contiguous", what);
  double err = t_rel_err(y, ref, n);
  cr_assert(err <= t_tol(dt), "%s [%s]: rel err %g > %g", what, eng_dtype_name(dt), err, t_tol(dt));
}

static void check_same_shape(const eng_tensor_t *y, const eng_tensor_t *x, eng_dtype_t dt) {
  cr_assert_eq(y->ndim, x->ndim);
  for (int d = 0; d < x->ndim; d++) cr_assert_eq(y->shape[d], x->shape[d]);
  cr_assert_eq(y->dtype, dt, "dtype %s, want %s", eng_dtype_name(y->dtype), eng_dtype_name(dt));
}

/* ---------------- softmax ---------------- */

static void check_softmax(eng_tensor_t *x, int64_t dim, int log_out, const char *what) {
  eng_tensor_t *y = NULL;
  T_OK(log_out ? eng_op_log_softmax(x, dim, &y) : eng_op_softmax(x, dim, &y));
  check_same_shape(y, x, x->dtype);
  int d = (int)(dim < 0 ? dim + (x->ndim ? x->ndim : 1) : dim);
  int64_t outer = 1, len = 1, inner = 1;
  if (x->ndim) {
    outer = t_numel(x->shape, d);
    len = x->shape[d];
    inner = t_numel(x->shape + d + 1, x->ndim - d - 1);
  }
  double *v = t_values(x), *ref = malloc(sizeof(double) * (size_t)(outer * len * inner));
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double mx = -INFINITY, s = 0;
      for (int64_t r = 0; r < len; r++) mx = fmax(mx, v[(o * len + r) * inner + i]);
      for (int64_t r = 0; r < len; r++) s += exp(v[(o * len + r) * inner + i] - mx);
      for (int64_t r = 0; r < len; r++) {
        int64_t at = (o * len + r) * inner + i;
        ref[at] = log_out ? v[at] - mx - log(s) : exp(v[at] - mx) / s;
      }
    }
  char msg[128];
  snprintf(msg, sizeof msg, "%s %s dim %lld", log_out ? "log_softmax" : "softmax", what,
           (long long)dim);
  check_close(y, ref, outer * len * inner, x->dtype, msg);
  free(v);
  free(ref);
  eng_tensor_release(y);
}

Test(norm, softmax_dims_dtypes) {
  int64_t s3[3] = {3, 4, 5}, s1[1] = {1023}, s2[2] = {7, 1};
  for (int k = 0; k < NFLOATS; k++)
    for (int lg = 0; lg < 2; lg++) {
      eng_dtype_t dt = FLOATS[k];
      eng_tensor_t *x = t_rand_tensor(s3, 3, dt, 1 + k, -5, 5),
                   *a = t_rand_tensor(s1, 1, dt, 2 + k, -5, 5);
      eng_tensor_t *b = t_rand_tensor(s2, 2, dt, 3 + k, -5, 5), *t = NULL;
      static const int64_t one[1] = {1};
      eng_tensor_t *s = t_rand_tensor(one, 0, dt, 4 + k, -5, 5);
      for (int64_t d = -1; d < 3; d++) check_softmax(x, d, lg, "3-d");
      check_softmax(a, 0, lg, "1023");
      check_softmax(b, 1, lg, "[7,1]");
      check_softmax(b, 0, lg, "[7,1]");
      check_softmax(s, 0, lg, "0-d");
      T_OK(eng_tensor_transpose(x, 0, 2, &t));
      check_softmax(t, -1, lg, "transposed");
      check_softmax(t, 1, lg, "transposed");
      eng_tensor_release(x);
      eng_tensor_release(a);
      eng_tensor_release(b);
      eng_tensor_release(s);
      eng_tensor_release(t);
    }
}

Test(norm, softmax_stable_and_large) {
  double v[4] = {1000, 1001, 1002, -1000};
  int64_t s[1] = {4};
  eng_tensor_t *x = t_tensor(v, s, 1, ENG_F32);
  check_softmax(x, 0, 0, "huge logits");
  check_softmax(x, 0, 1, "huge logits");
  eng_tensor_release(x);
  int64_t big[2] = {64, 1031};
  eng_tensor_t *g = t_rand_tensor(big, 2, ENG_F32, 9, -8, 8);
  check_softmax(g, 1, 0, "large");
  check_softmax(g, 0, 1, "large columns");
  eng_tensor_release(g);
}

Test(norm, softmax_errors) {
  int64_t s[2] = {2, 3};
  eng_tensor_t *i = t_rand_tensor(s, 2, ENG_I64, 1, 0, 9),
               *x = t_rand_tensor(s, 2, ENG_F32, 2, 0, 1), *y = NULL;
  T_FAILS(eng_op_softmax(i, 1, &y), ENG_ERR_DTYPE, "softmax: expected a floating dtype, got i64");
  T_FAILS(eng_op_log_softmax(i, 1, &y), ENG_ERR_DTYPE,
          "log_softmax: expected a floating dtype, got i64");
  T_FAILS(eng_op_softmax(x, 2, &y), ENG_ERR_INDEX, "softmax");
  T_FAILS(eng_op_log_softmax(x, -3, &y), ENG_ERR_INDEX, "log_softmax");
  T_FAILS(eng_op_softmax(NULL, 0, &y), ENG_ERR_ARG, "softmax: input 1 is missing");
  cr_assert_null(y);
  eng_tensor_release(i);
  eng_tensor_release(x);
}

/* ---------------- layer_norm, rms_norm ---------------- */

/* rms = 0: layer norm with w, b (either may be NULL); rms = 1: RMS norm with w. */
static void check_norm(int rms, eng_tensor_t *x, eng_tensor_t *w, eng_tensor_t *b, double eps,
                       const char *what) {
  eng_tensor_t *y = NULL;
  T_OK(rms ? eng_op_rms_norm(x, w, eps, &y) : eng_op_layer_norm(x, w, b, eps, &y));
  check_same_shape(y, x, x->dtype);
  int64_t d = x->shape[x->ndim - 1], n = eng_tensor_numel(x), rows = n / d;
  double *v = t_values(x), *wv = w ? t_values(w) : NULL, *bv = b ? t_values(b) : NULL;
  double *ref = malloc(sizeof(double) * (size_t)n);
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = v + r * d;
    double mean = 0, var = 0, ms = 0;
    for (int64_t k = 0; k < d; k++) mean += xr[k] / (double)d;
    for (int64_t k = 0; k < d; k++) var += (xr[k] - mean) * (xr[k] - mean) / (double)d;
    for (int64_t k = 0; k < d; k++) ms += xr[k] * xr[k] / (double)d;
    for (int64_t k = 0; k < d; k++) {
      double o = rms ? xr[k] / sqrt(ms + eps) : (xr[k] - mean) / sqrt(var + eps);
      if (wv) o *= wv[k];
      if (bv) o += bv[k];
      ref[r * d + k] = o;
    }
  }
  char msg[128];
  snprintf(msg, sizeof msg, "%s %s", rms ? "rms_norm" : "layer_norm", what);
  check_close(y, ref, n, x->dtype, msg);
  free(v);
  free(wv);
  free(bv);
  free(ref);
  eng_tensor_release(y);
}

Test(norm, layer_and_rms_norm) {
  static const int64_t shapes[][3] = {{2, 4}, {7, 33}, {1, 1023}, {3, 2, 5}, {1}};
  static const int nds[] = {2, 2, 2, 3, 1};
  for (int k = 0; k < NFLOATS; k++)
    for (int s = 0; s < 5; s++) {
      eng_dtype_t dt = FLOATS[k];
      int64_t d = shapes[s][nds[s] - 1];
      eng_tensor_t *x = t_rand_tensor(shapes[s], nds[s], dt, 10 + s, -3, 5);
      eng_tensor_t *w = t_rand_tensor(&d, 1, dt, 20 + s, 0.5, 1.5),
                   *b = t_rand_tensor(&d, 1, dt, 30 + s, -1, 1);
      check_norm(0, x, w, b, 1e-5, "w, b");
      check_norm(0, x, NULL, NULL, 1e-5, "plain");
      check_norm(0, x, w, NULL, 0.1, "w only");
      check_norm(0, x, NULL, b, 1e-5, "b only");
      check_norm(1, x, w, NULL, 1e-6, "w");
      check_norm(1, x, NULL, NULL, 1e-2, "plain");
      eng_tensor_release(x);
      eng_tensor_release(w);
      eng_tensor_release(b);
    }
}

Test(norm, norm_views_and_large) {
  for (int k = 0; k < NFLOATS; k++) {
    eng_dtype_t dt = FLOATS[k];
    int64_t s[2] = {9, 6}, wd[1] = {18};
    eng_tensor_t *x = t_rand_tensor(s, 2, dt, 1, -2, 2), *t = NULL; /* transposed: [6,9] */
    eng_tensor_t *w2 = t_rand_tensor(wd, 1, dt, 2, 0.5, 1.5), *ws = NULL;
    eng_tensor_t *b = t_rand_tensor(wd, 1, dt, 3, -1, 1), *bn = NULL;
    T_OK(eng_tensor_transpose(x, 0, 1, &t));
    T_OK(eng_tensor_slice(w2, 0, 0, 18, 2, &ws)); /* [9], stride 2 */
    T_OK(eng_tensor_narrow(b, 0, 4, 9, &bn));
    check_norm(0, t, ws, bn, 1e-5, "strided x, w, b");
    check_norm(1, t, ws, NULL, 1e-5, "strided x, w");
    eng_tensor_release(x);
    eng_tensor_release(t);
    eng_tensor_release(w2);
    eng_tensor_release(ws);
    eng_tensor_release(b);
    eng_tensor_release(bn);
  }
  int64_t big[2] = {300, 257}, d[1] = {257};
  eng_tensor_t *g = t_rand_tensor(big, 2, ENG_F32, 4, -2, 2),
               *w = t_rand_tensor(d, 1, ENG_F32, 5, 0.5, 1.5);
  check_norm(0, g, w, w, 1e-5, "large");
  check_norm(1, g, w, NULL, 1e-5, "large");
  eng_tensor_release(g);
  eng_tensor_release(w);
}

Test(norm, norm_errors) {
  int64_t s[2] = {2, 4}, five[1] = {5}, four[1] = {4}, sq[2] = {2, 2};
  eng_tensor_t *x = t_rand_tensor(s, 2, ENG_F32, 1, 0, 1),
               *w5 = t_rand_tensor(five, 1, ENG_F32, 2, 0, 1);
  eng_tensor_t *w64 = t_rand_tensor(four, 1, ENG_F64, 3, 0, 1),
               *w2d = t_rand_tensor(sq, 2, ENG_F32, 4, 0, 1);
  eng_tensor_t *xi = t_rand_tensor(s, 2, ENG_I32, 5, 0, 9),
               *w4 = t_rand_tensor(four, 1, ENG_F32, 6, 0, 1), *y = NULL;
  static const int64_t one[1] = {1};
  eng_tensor_t *s0 = t_rand_tensor(one, 0, ENG_F32, 7, 0, 1);
  T_FAILS(eng_op_layer_norm(x, w5, NULL, 1e-5, &y), ENG_ERR_SHAPE,
          "layer_norm: weight has shape [5] but the last dim of x [2,4] is 4");
  T_FAILS(eng_op_layer_norm(x, w4, w5, 1e-5, &y), ENG_ERR_SHAPE,
          "layer_norm: bias has shape [5] but the last dim of x [2,4] is 4");
  T_FAILS(eng_op_layer_norm(x, w2d, NULL, 1e-5, &y), ENG_ERR_SHAPE, "weight has shape [2,2]");
  T_FAILS(eng_op_rms_norm(x, w5, 1e-5, &y), ENG_ERR_SHAPE,
          "rms_norm: weight has shape [5] but the last dim of x [2,4] is 4");
  T_FAILS(eng_op_layer_norm(x, w64, NULL, 1e-5, &y), ENG_ERR_DTYPE,
          "layer_norm: weight has dtype f64 but x has f32");
  T_FAILS(eng_op_rms_norm(xi, NULL, 1e-5, &y), ENG_ERR_DTYPE,
          "rms_norm: expected a floating dtype, got i32");
  T_FAILS(eng_op_layer_norm(s0, NULL, NULL, 1e-5, &y), ENG_ERR_SHAPE,
          "layer_norm: x must have at least one dim");
  T_FAILS(eng_op_rms_norm(NULL, NULL, 1e-5, &y), ENG_ERR_ARG, "rms_norm: input 1 is missing");
  cr_assert_null(y);
  eng_tensor_release(x);
  eng_tensor_release(w5);
  eng_tensor_release(w64);
  eng_tensor_release(w2d);
  eng_tensor_release(xi);
  eng_tensor_release(w4);
  eng_tensor_release(s0);
}

/* ---------------- cross_entropy ---------------- */

/* Mean over non-ignored rows of logsumexp - logit of the target (NaN when none counts). */
static double ref_cross_entropy(const eng_tensor_t *logits, const eng_tensor_t *targets,
                                int64_t ignore) {
  int64_t c = logits->shape[logits->ndim - 1], rows = eng_tensor_numel(targets);
  double *x = t_values(logits), *t = t_values(targets), sum = 0;
  int64_t cnt = 0;
  for (int64_t r = 0; r < rows; r++) {
    if ((int64_t)t[r] == ignore) continue;
    double mx = -INFINITY, s = 0;
    for (int64_t k = 0; k < c; k++) mx = fmax(mx, x[r * c + k]);
    for (int64_t k = 0; k < c; k++) s += exp(x[r * c + k] - mx);
    sum += mx + log(s) - x[r * c + (int64_t)t[r]];
    cnt++;
  }
  free(x);
  free(t);
  return sum / (double)cnt;
}

/* Targets in [0, c), with every `every`-th replaced by `ignore` (every = 0: none). */
static eng_tensor_t *targets_for(const int64_t *shape, int nd, int64_t c, eng_dtype_t dt,
                                 uint64_t seed, int every, int64_t ignore) {
  int64_t n = t_numel(shape, nd);
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  t_random(v, n, seed, 0, (double)c);
  for (int64_t i = 0; i < n; i++) v[i] = every && i % every == 1 ? (double)ignore : floor(v[i]);
  eng_tensor_t *t = t_tensor(v, shape, nd, dt);
  free(v);
  return t;
}

static void check_ce(eng_tensor_t *logits, eng_tensor_t *targets, int64_t ignore,
                     const char *what) {
  eng_tensor_t *y = NULL;
  T_OK(eng_op_cross_entropy(logits, targets, ignore, &y));
  eng_dtype_t want = logits->dtype == ENG_F64 ? ENG_F64 : ENG_F32;
  cr_assert_eq(y->ndim, 0, "%s: a 0-d loss", what);
  cr_assert_eq(y->dtype, want, "%s: dtype %s", what, eng_dtype_name(y->dtype));
  double ref = ref_cross_entropy(logits, targets, ignore), got;
  T_OK(eng_tensor_to_f64(y, &got));
  cr_assert(fabs(got - ref) <= t_tol(want) * fabs(ref), "%s [%s]: %.10g, want %.10g", what,
            eng_dtype_name(logits->dtype), got, ref);
  eng_tensor_release(y);
}

Test(norm, cross_entropy_values) {
  for (int k = 0; k < NFLOATS; k++) {
    eng_dtype_t dt = FLOATS[k];
    int64_t s2[2] = {7, 5}, t1[1] = {7}, s3[3] = {2, 3, 11}, t2[2] = {2, 3}, s4[2] = {1, 1023},
            t4[1] = {1};
    eng_tensor_t *x = t_rand_tensor(s2, 2, dt, 1, -4, 4),
                 *t = targets_for(t1, 1, 5, ENG_I64, 2, 0, -100);
    check_ce(x, t, -100, "[7,5]");
    eng_tensor_t *ti = targets_for(t1, 1, 5, ENG_I64, 3, 3, -100);
    check_ce(x, ti, -100, "[7,5] some ignored");
    eng_tensor_t *tc = targets_for(t1, 1, 5, ENG_I32, 4, 0, 0);
    check_ce(x, tc, 2, "[7,5] class 2 ignored, i32 targets");
    eng_tensor_t *x3 = t_rand_tensor(s3, 3, dt, 5, -4, 4),
                 *t3 = targets_for(t2, 2, 11, ENG_I32, 6, 4, -1);
    check_ce(x3, t3, -1, "[2,3,11]");
    eng_tensor_t *x4 = t_rand_tensor(s4, 2, dt, 7, -4, 4),
                 *t4t = targets_for(t4, 1, 1023, ENG_I64, 8, 0, -100);
    check_ce(x4, t4t, -100, "[1,1023]");
    eng_tensor_t *tu = targets_for(t1, 1, 5, ENG_U8, 9, 0, 0);
    check_ce(x, tu, -100, "u8 targets");
    eng_tensor_release(x);
    eng_tensor_release(t);
    eng_tensor_release(ti);
    eng_tensor_release(tc);
    eng_tensor_release(x3);
    eng_tensor_release(t3);
    eng_tensor_release(x4);
    eng_tensor_release(t4t);
    eng_tensor_release(tu);
  }
}

Test(norm, cross_entropy_views_large_and_ignored) {
  int64_t s[2] = {6, 9}, tn[1] = {12};
  eng_tensor_t *x = t_rand_tensor(s, 2, ENG_F32, 1, -3, 3), *xt = NULL; /* transposed: [9,6] */
  eng_tensor_t *t = targets_for(tn, 1, 6, ENG_I64, 2, 0, -100), *ts = NULL;
  T_OK(eng_tensor_transpose(x, 0, 1, &xt));
  T_OK(eng_tensor_slice(t, 0, 1, 10, 1, &ts)); /* [9] at offset 1 */
  check_ce(xt, ts, -100, "strided logits and targets");
  int64_t big[2] = {300, 257}, bt[1] = {300};
  eng_tensor_t *g = t_rand_tensor(big, 2, ENG_F32, 3, -5, 5),
               *gt = targets_for(bt, 1, 257, ENG_I64, 4, 5, -100);
  check_ce(g, gt, -100, "large");
  /* every target ignored: NaN, like torch */
  eng_tensor_t *all = targets_for(bt, 1, 257, ENG_I64, 5, 0, -100), *y = NULL;
  for (int64_t i = 0; i < 300; i++) ((int64_t *)eng_tensor_data(all))[i] = -100;
  T_OK(eng_op_cross_entropy(g, all, -100, &y));
  double got;
  T_OK(eng_tensor_to_f64(y, &got));
  cr_assert(isnan(got), "all ignored gives NaN, got %g", got);
  eng_tensor_release(y);
  eng_tensor_release(all);
  eng_tensor_release(x);
  eng_tensor_release(xt);
  eng_tensor_release(t);
  eng_tensor_release(ts);
  eng_tensor_release(g);
  eng_tensor_release(gt);
}

Test(norm, cross_entropy_errors) {
  int64_t s[2] = {2, 5}, t2[1] = {2}, t3[1] = {3};
  eng_tensor_t *x = t_rand_tensor(s, 2, ENG_F32, 1, -1, 1), *y = NULL;
  double bad[2] = {1, 7}, neg[2] = {-1, 0};
  eng_tensor_t *tb = t_tensor(bad, t2, 1, ENG_I64), *tn = t_tensor(neg, t2, 1, ENG_I32);
  eng_tensor_t *tw = targets_for(t3, 1, 5, ENG_I64, 2, 0, 0),
               *tf = t_rand_tensor(t2, 1, ENG_F32, 3, 0, 4);
  eng_tensor_t *xi = t_rand_tensor(s, 2, ENG_I64, 4, 0, 4);
  static const int64_t one[1] = {1};
  eng_tensor_t *x0 = t_rand_tensor(one, 0, ENG_F32, 5, 0, 1);
  T_FAILS(eng_op_cross_entropy(x, tb, -100, &y), ENG_ERR_INDEX,
          "cross_entropy: target 7 (at 1) is out of range for 5 classes");
  T_FAILS(eng_op_cross_entropy(x, tn, -100, &y), ENG_ERR_INDEX,
          "target -1 (at 0) is out of range for 5 classes");
  T_FAILS(eng_op_cross_entropy(x, tw, -100, &y), ENG_ERR_SHAPE,
          "cross_entropy: targets have shape [3] but logits [2,5] need [2]");
  T_FAILS(eng_op_cross_entropy(x, tf, -100, &y), ENG_ERR_DTYPE,
          "cross_entropy: targets must have an integer dtype, got f32");
  T_FAILS(eng_op_cross_entropy(xi, tb, -100, &y), ENG_ERR_DTYPE,
          "cross_entropy: expected a floating dtype, got i64");
  T_FAILS(eng_op_cross_entropy(x0, tb, -100, &y), ENG_ERR_SHAPE,
          "cross_entropy: logits must have a class dim");
  T_FAILS(eng_op_cross_entropy(x, NULL, -100, &y), ENG_ERR_ARG,
          "cross_entropy: input 2 is missing");
  cr_assert_null(y);
  /* an out-of-range value that equals ignore_index is fine */
  check_ce(x, tn, -1, "ignored -1");
  eng_tensor_release(x);
  eng_tensor_release(tb);
  eng_tensor_release(tn);
  eng_tensor_release(tw);
  eng_tensor_release(tf);
  eng_tensor_release(xi);
  eng_tensor_release(x0);
}
