/* softmax_backward, rms_norm_backward, layer_norm_backward and cross_entropy_backward against
 * central finite differences of the forward ops in f64, then in every float dtype (and mixed
 * dtypes) against the f64 op on the same stored values; add_rms_norm against plain loops. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static const eng_dtype_t FLOATS[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};
#define NFLOATS 4
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define FD_TOL 1e-6

/* ---------------- finite differences ---------------- */

/* The scalar whose gradient the backward ops compute: sum(gy * forward(inputs)). */
typedef double (*loss_fn)(void *ctx);

/* Central differences of loss with respect to every element of p (a contiguous f64 tensor the
 * loss reads), perturbed in place. */
static double *fd_grad(eng_tensor_t *p, loss_fn loss, void *ctx) {
  const int64_t n = eng_tensor_numel(p);
  double *g = malloc(sizeof(double) * (size_t)(n ? n : 1)), *v = eng_tensor_data(p);
  const double h = 1e-6;
  for (int64_t i = 0; i < n; i++) {
    const double keep = v[i];
    v[i] = keep + h;
    const double up = loss(ctx);
    v[i] = keep - h;
    const double down = loss(ctx);
    v[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

static void expect_fd(const eng_tensor_t *got, eng_tensor_t *p, loss_fn loss, void *ctx,
                      const char *what) {
  cr_assert(got != NULL, "%s: no gradient", what);
  cr_assert(eng_shape_equal(got, p), "%s: gradient shape differs from its input's", what);
  double *want = fd_grad(p, loss, ctx);
  double err = t_rel_err(got, want, eng_tensor_numel(p));
  cr_assert(err < FD_TOL, "%s: rel err %g against finite differences", what, err);
  free(want);
}

/* sum(gy * y) over all elements. */
static double dot_with(const eng_tensor_t *gy, eng_tensor_t *y) {
  const int64_t n = eng_tensor_numel(y);
  double *a = t_values(gy), *b = t_values(y), s = 0;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  free(a);
  free(b);
  eng_tensor_release(y);
  return s;
}

typedef struct {
  eng_tensor_t *x, *w, *b, *gy, *targets, *gloss;
  int64_t dim, ignore;
  int log;
  double eps;
} fwd_t;

static double softmax_loss(void *c) {
  fwd_t *f = c;
  eng_tensor_t *y = NULL;
  T_OK(f->log ? eng_op_log_softmax(f->x, f->dim, &y) : eng_op_softmax(f->x, f->dim, &y));
  return dot_with(f->gy, y);
}

static double rms_loss(void *c) {
  fwd_t *f = c;
  eng_tensor_t *y = NULL;
  T_OK(eng_op_rms_norm(f->x, f->w, f->eps, &y));
  return dot_with(f->gy, y);
}

static double layer_loss(void *c) {
  fwd_t *f = c;
  eng_tensor_t *y = NULL;
  T_OK(eng_op_layer_norm(f->x, f->w, f->b, f->eps, &y));
  return dot_with(f->gy, y);
}

static double ce_loss(void *c) {
  fwd_t *f = c;
  eng_tensor_t *y = NULL;
  T_OK(eng_op_cross_entropy(f->x, f->targets, f->ignore, &y));
  double v = *(double *)eng_tensor_data(y) * *(double *)eng_tensor_data(f->gloss);
  eng_tensor_release(y);
  return v;
}

static void check_softmax_fd(const int64_t *shape, int nd, int64_t dim, int log) {
  fwd_t f = {.dim = dim, .log = log};
  f.x = t_rand_tensor(shape, nd, ENG_F64, 11 + (uint64_t)dim, -3, 3);
  f.gy = t_rand_tensor(shape, nd, ENG_F64, 12 + (uint64_t)dim, -2, 2);
  eng_tensor_t *y = NULL, *gx = NULL;
  T_OK(log ? eng_op_log_softmax(f.x, dim, &y) : eng_op_softmax(f.x, dim, &y));
  T_OK(eng_op_softmax_backward(f.gy, y, dim, log, &gx));
  expect_fd(gx, f.x, softmax_loss, &f, log ? "log_softmax_backward gx" : "softmax_backward gx");
  eng_tensor_release(y);
  eng_tensor_release(gx);
  eng_tensor_release(f.x);
  eng_tensor_release(f.gy);
}

Test(norm_backward, softmax_finite_differences) {
  for (int log = 0; log < 2; log++) {
    check_softmax_fd(SHAPE(4, 7), -1, log);
    check_softmax_fd(SHAPE(4, 7), 0, log);
    check_softmax_fd(SHAPE(3, 5, 2), 1, log);
    check_softmax_fd(SHAPE(9), 0, log);
  }
}

/* rms (1) or layer norm (0) with weight / bias present as asked, shape [rows, d]. */
static void check_norm_fd(int rms, int64_t rows, int64_t d, int has_w, int has_b, double eps) {
  fwd_t f = {.eps = eps};
  f.x = t_rand_tensor(SHAPE(rows, d), ENG_F64, 21, -2, 3);
  f.gy = t_rand_tensor(SHAPE(rows, d), ENG_F64, 22, -1, 1);
  f.w = has_w ? t_rand_tensor(SHAPE(d), ENG_F64, 23, 0.5, 1.5) : NULL;
  f.b = has_b ? t_rand_tensor(SHAPE(d), ENG_F64, 24, -1, 1) : NULL;
  eng_tensor_t *gx = NULL, *gw = NULL, *gb = NULL;
  loss_fn loss = rms ? rms_loss : layer_loss;
  if (rms)
    T_OK(eng_op_rms_norm_backward(f.gy, f.x, f.w, f.eps, &gx, &gw));
  else
    T_OK(eng_op_layer_norm_backward(f.gy, f.x, f.w, f.b, f.eps, &gx, &gw, &gb));
  const char *name = rms ? "rms_norm_backward" : "layer_norm_backward";
  char what[128];
  snprintf(what, sizeof what, "%s gx [%lld,%lld] w %d b %d", name, (long long)rows, (long long)d,
           has_w, has_b);
  expect_fd(gx, f.x, loss, &f, what);
  if (has_w) {
    snprintf(what, sizeof what, "%s gw", name);
    expect_fd(gw, f.w, loss, &f, what);
  } else {
    cr_assert_null(gw, "%s: gw without w", name);
  }
  if (has_b)
    expect_fd(gb, f.b, loss, &f, "layer_norm_backward gb");
  else
    cr_assert_null(gb, "%s: gb without b", name);
  eng_tensor_t *all[] = {gx, gw, gb, f.x, f.gy, f.w, f.b};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) eng_tensor_release(all[k]);
}

Test(norm_backward, rms_norm_finite_differences) {
  check_norm_fd(1, 5, 9, 1, 0, 1e-6);
  check_norm_fd(1, 5, 9, 0, 0, 1e-6);
  /* one element: y = x / sqrt(x^2 + eps), whose slope is all eps (a small eps leaves only noise) */
  check_norm_fd(1, 1, 1, 1, 0, 0.5);
  check_norm_fd(1, 3, 300, 1, 0, 1e-6); /* rows longer than a CPU block */
}

Test(norm_backward, layer_norm_finite_differences) {
  check_norm_fd(0, 5, 9, 1, 1, 1e-5);
  check_norm_fd(0, 5, 9, 0, 0, 1e-5);
  check_norm_fd(0, 4, 6, 1, 0, 0.1);
  check_norm_fd(0, 4, 6, 0, 1, 1e-5);
  check_norm_fd(0, 3, 300, 1, 1, 1e-5);
}

Test(norm_backward, cross_entropy_finite_differences) {
  static const int64_t ignores[] = {-100, 2};
  for (int i = 0; i < 2; i++) {
    fwd_t f = {.ignore = ignores[i]};
    f.x = t_rand_tensor(SHAPE(2, 3, 5), ENG_F64, 31, -3, 3);
    double tv[6] = {0, 4, i ? 1 : -100, 2, 3, 2};
    f.targets = t_tensor(tv, SHAPE(2, 3), ENG_I64);
    double g = 0.7;
    f.gloss = t_tensor(&g, SHAPE(1), ENG_F64);
    eng_tensor_t *gx = NULL;
    T_OK(eng_op_cross_entropy_backward(f.x, f.targets, f.gloss, f.ignore, &gx));
    expect_fd(gx, f.x, ce_loss, &f, "cross_entropy_backward glogits");
    /* ignored rows get exactly 0 */
    double *v = t_values(gx);
    for (int r = 0; r < 6; r++)
      if (tv[r] == (double)f.ignore)
        for (int k = 0; k < 5; k++) cr_assert_eq(v[r * 5 + k], 0.0, "ignored row %d is not 0", r);
    free(v);
    eng_tensor_t *all[] = {gx, f.x, f.targets, f.gloss};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) eng_tensor_release(all[k]);
  }
}

/* ---------------- dtypes: against the f64 op on the same stored values ---------------- */

static eng_tensor_t *as_f64(eng_tensor_t *t) {
  eng_tensor_t *o = NULL;
  if (t) T_OK(eng_tensor_to_dtype(t, ENG_F64, &o));
  return o;
}

/* got (any dtype) against want (f64) under got's dtype's tolerance. */
static void expect_near(const eng_tensor_t *got, eng_tensor_t *want, eng_dtype_t dt,
                        const char *what) {
  cr_assert(got && want, "%s: missing output", what);
  cr_assert_eq(got->dtype, dt, "%s: dtype %s, want %s", what, eng_dtype_name(got->dtype),
               eng_dtype_name(dt));
  double *w = t_values(want);
  double err = t_rel_err(got, w, eng_tensor_numel(want));
  cr_assert(err <= t_tol(dt), "%s [%s]: rel err %g > %g", what, eng_dtype_name(dt), err, t_tol(dt));
  free(w);
}

/* The norm backwards with gy, x and w (and b) of the given dtypes against the f64 op. */
static void check_norm_dtypes(int rms, eng_dtype_t gdt, eng_dtype_t xdt, eng_dtype_t wdt,
                              int64_t rows, int64_t d) {
  eng_tensor_t *gy = t_rand_tensor(SHAPE(rows, d), gdt, 41, -1, 1),
               *x = t_rand_tensor(SHAPE(rows, d), xdt, 42, -2, 3),
               *w = t_rand_tensor(SHAPE(d), wdt, 43, 0.5, 1.5),
               *b = t_rand_tensor(SHAPE(d), wdt, 44, -1, 1);
  eng_tensor_t *gy64 = as_f64(gy), *x64 = as_f64(x), *w64 = as_f64(w), *b64 = as_f64(b);
  eng_tensor_t *gx = NULL, *gw = NULL, *gb = NULL, *rx = NULL, *rw = NULL, *rb = NULL;
  if (rms) {
    T_OK(eng_op_rms_norm_backward(gy, x, w, 1e-6, &gx, &gw));
    T_OK(eng_op_rms_norm_backward(gy64, x64, w64, 1e-6, &rx, &rw));
  } else {
    T_OK(eng_op_layer_norm_backward(gy, x, w, b, 1e-5, &gx, &gw, &gb));
    T_OK(eng_op_layer_norm_backward(gy64, x64, w64, b64, 1e-5, &rx, &rw, &rb));
  }
  char what[160];
  snprintf(what, sizeof what, "%s gy %s x %s w %s [%lld,%lld]",
           rms ? "rms_norm_backward" : "layer_norm_backward", eng_dtype_name(gdt),
           eng_dtype_name(xdt), eng_dtype_name(wdt), (long long)rows, (long long)d);
  expect_near(gx, rx, xdt, what);
  expect_near(gw, rw, wdt, what);
  if (!rms) expect_near(gb, rb, wdt, what);
  eng_tensor_t *all[] = {gy, x, w, b, gy64, x64, w64, b64, gx, gw, gb, rx, rw, rb};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) eng_tensor_release(all[k]);
}

Test(norm_backward, norm_dtypes_and_mixes) {
  for (int rms = 0; rms < 2; rms++) {
    for (int k = 1; k < NFLOATS; k++) check_norm_dtypes(rms, FLOATS[k], FLOATS[k], FLOATS[k], 7, 33);
    /* the LM's mix: a bf16 gradient against the f32 residual stream, bf16 or f32 weights */
    check_norm_dtypes(rms, ENG_BF16, ENG_F32, ENG_BF16, 64, 600); /* parallel over rows */
    check_norm_dtypes(rms, ENG_BF16, ENG_F32, ENG_F32, 5, 1023);
    check_norm_dtypes(rms, ENG_F32, ENG_BF16, ENG_F16, 5, 40);
  }
}

Test(norm_backward, softmax_and_cross_entropy_dtypes) {
  for (int k = 1; k < NFLOATS; k++) {
    eng_dtype_t dt = FLOATS[k];
    eng_tensor_t *x = t_rand_tensor(SHAPE(6, 37), dt, 51, -4, 4), *y = NULL, *gx = NULL, *rx = NULL;
    eng_tensor_t *gy = t_rand_tensor(SHAPE(6, 37), dt, 52, -1, 1);
    for (int log = 0; log < 2; log++)
      for (int64_t dim = 0; dim < 2; dim++) {
        T_OK(log ? eng_op_log_softmax(x, dim, &y) : eng_op_softmax(x, dim, &y));
        eng_tensor_t *y64 = as_f64(y), *gy64 = as_f64(gy);
        T_OK(eng_op_softmax_backward(gy, y, dim, log, &gx));
        T_OK(eng_op_softmax_backward(gy64, y64, dim, log, &rx));
        expect_near(gx, rx, dt, log ? "log_softmax_backward" : "softmax_backward");
        eng_tensor_t *all[] = {y, y64, gy64, gx, rx};
        for (size_t j = 0; j < sizeof all / sizeof all[0]; j++) eng_tensor_release(all[j]);
      }
    double tv[6] = {3, -100, 0, 36, 17, 5}, g = 1.25;
    eng_tensor_t *t = t_tensor(tv, SHAPE(6), ENG_I32), *gl = t_tensor(&g, SHAPE(1), ENG_F32);
    eng_tensor_t *x64 = as_f64(x), *gl64 = as_f64(gl);
    T_OK(eng_op_cross_entropy_backward(x, t, gl, -100, &gx));
    T_OK(eng_op_cross_entropy_backward(x64, t, gl64, -100, &rx));
    expect_near(gx, rx, dt, "cross_entropy_backward");
    eng_tensor_t *all[] = {x, gy, t, gl, x64, gl64, gx, rx};
    for (size_t j = 0; j < sizeof all / sizeof all[0]; j++) eng_tensor_release(all[j]);
  }
}

/* Strided inputs give what their contiguous copies give. */
Test(norm_backward, strided_inputs) {
  eng_tensor_t *xb = t_rand_tensor(SHAPE(9, 6), ENG_F32, 61, -2, 2), *gb = t_rand_tensor(SHAPE(9, 6), ENG_F32, 62, -1, 1);
  eng_tensor_t *wb = t_rand_tensor(SHAPE(18), ENG_F32, 63, 0.5, 1.5);
  eng_tensor_t *x = NULL, *g = NULL, *w = NULL, *xc = NULL, *gc = NULL, *wc = NULL;
  T_OK(eng_tensor_transpose(xb, 0, 1, &x)); /* [6, 9] */
  T_OK(eng_tensor_transpose(gb, 0, 1, &g));
  T_OK(eng_tensor_slice(wb, 0, 0, 18, 2, &w)); /* [9], stride 2 */
  T_OK(eng_tensor_contiguous(x, &xc));
  T_OK(eng_tensor_contiguous(g, &gc));
  T_OK(eng_tensor_contiguous(w, &wc));
  eng_tensor_t *a[3] = {0}, *c[3] = {0};
  T_OK(eng_op_layer_norm_backward(g, x, w, w, 1e-5, &a[0], &a[1], &a[2]));
  T_OK(eng_op_layer_norm_backward(gc, xc, wc, wc, 1e-5, &c[0], &c[1], &c[2]));
  for (int k = 0; k < 3; k++) {
    double *want = t_values(c[k]);
    cr_assert(t_max_abs_err(a[k], want, eng_tensor_numel(c[k])) == 0, "strided output %d differs", k);
    free(want);
    eng_tensor_release(a[k]);
    eng_tensor_release(c[k]);
  }
  T_OK(eng_op_softmax_backward(g, x, 0, 0, &a[0]));
  T_OK(eng_op_softmax_backward(gc, xc, 0, 0, &c[0]));
  double *want = t_values(c[0]);
  cr_assert(t_max_abs_err(a[0], want, eng_tensor_numel(c[0])) == 0, "strided softmax_backward");
  free(want);
  eng_tensor_t *all[] = {a[0], c[0], xb, gb, wb, x, g, w, xc, gc, wc};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) eng_tensor_release(all[k]);
}

/* gw and gb are the same bits whatever the thread count. */
Test(norm_backward, parameter_gradients_are_deterministic) {
  eng_tensor_t *x = t_rand_tensor(SHAPE(300, 257), ENG_F32, 71, -2, 2),
               *gy = t_rand_tensor(SHAPE(300, 257), ENG_BF16, 72, -1, 1),
               *w = t_rand_tensor(SHAPE(257), ENG_F32, 73, 0.5, 1.5);
  eng_tensor_t *gx[2] = {0}, *gw[2] = {0}, *gb[2] = {0};
  const int threads = omp_get_max_threads();
  for (int run = 0; run < 2; run++) {
    omp_set_num_threads(run ? 3 : 1);
    T_OK(eng_op_layer_norm_backward(gy, x, w, w, 1e-5, &gx[run], &gw[run], &gb[run]));
  }
  omp_set_num_threads(threads);
  cr_assert(!memcmp(eng_tensor_data(gw[0]), eng_tensor_data(gw[1]), 257 * sizeof(float)), "gw differs");
  cr_assert(!memcmp(eng_tensor_data(gb[0]), eng_tensor_data(gb[1]), 257 * sizeof(float)), "gb differs");
  eng_tensor_t *all[] = {x, gy, w, gx[0], gx[1], gw[0], gw[1], gb[0], gb[1]};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) eng_tensor_release(all[k]);
}

/* ---------------- add_rms_norm against plain loops ---------------- */

static float round_f32(double v) { return (float)v; }

static void check_add_rms_norm(eng_dtype_t xdt, eng_dtype_t rdt, int has_r, int has_w, int64_t rows,
                               int64_t d) {
  eng_tensor_t *x = t_rand_tensor(SHAPE(rows, d), xdt, 81, -2, 2),
               *r = has_r ? t_rand_tensor(SHAPE(rows, d), rdt, 82, -3, 3) : NULL,
               *w = has_w ? t_rand_tensor(SHAPE(d), ENG_BF16, 83, 0.5, 1.5) : NULL;
  eng_tensor_t *y = NULL, *h = NULL;
  const double eps = 1e-6;
  T_OK(eng_op_add_rms_norm(x, r, w, eps, &y, &h));
  const int wide = xdt == ENG_F64 || (has_r && rdt == ENG_F64);
  cr_assert_eq(h->dtype, wide ? ENG_F64 : ENG_F32, "residual_out dtype %s", eng_dtype_name(h->dtype));
  cr_assert_eq(y->dtype, xdt);
  double *xv = t_values(x), *rv = r ? t_values(r) : NULL, *wv = w ? t_values(w) : NULL;
  double *hv = malloc(sizeof(double) * (size_t)(rows * d)), *yv = malloc(sizeof(double) * (size_t)(rows * d));
  for (int64_t i = 0; i < rows; i++) {
    double ms = 0;
    for (int64_t k = 0; k < d; k++) {
      double s = xv[i * d + k] + (rv ? rv[i * d + k] : 0);
      hv[i * d + k] = wide ? s : (double)round_f32(s);
      ms += hv[i * d + k] * hv[i * d + k] / (double)d;
    }
    for (int64_t k = 0; k < d; k++)
      yv[i * d + k] = hv[i * d + k] / sqrt(ms + eps) * (wv ? wv[k] : 1.0);
  }
  char what[128];
  snprintf(what, sizeof what, "add_rms_norm x %s residual %s w %d [%lld,%lld]", eng_dtype_name(xdt),
           has_r ? eng_dtype_name(rdt) : "none", has_w, (long long)rows, (long long)d);
  cr_assert(t_max_abs_err(h, hv, rows * d) == 0, "%s: residual_out is not x + residual", what);
  double err = t_rel_err(y, yv, rows * d);
  cr_assert(err <= t_tol(xdt), "%s: y rel err %g", what, err);
  free(xv);
  free(rv);
  free(wv);
  free(hv);
  free(yv);
  eng_tensor_t *all[] = {x, r, w, y, h};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) eng_tensor_release(all[k]);
}

Test(norm_backward, add_rms_norm) {
  for (int k = 0; k < NFLOATS; k++) {
    check_add_rms_norm(FLOATS[k], FLOATS[k], 1, 1, 5, 33);
    check_add_rms_norm(FLOATS[k], ENG_F32, 1, 1, 3, 300);
    check_add_rms_norm(FLOATS[k], ENG_F32, 0, 1, 4, 17);
    check_add_rms_norm(FLOATS[k], ENG_F32, 1, 0, 2, 8);
  }
  check_add_rms_norm(ENG_BF16, ENG_F32, 1, 1, 64, 600); /* parallel over rows */
  check_add_rms_norm(ENG_F32, ENG_F64, 1, 1, 3, 9);
}

/* ---------------- misuse ---------------- */

Test(norm_backward, errors) {
  eng_tensor_t *x = t_rand_tensor(SHAPE(2, 3), ENG_F32, 91, -1, 1),
               *x4 = t_rand_tensor(SHAPE(2, 4), ENG_F32, 92, -1, 1),
               *w4 = t_rand_tensor(SHAPE(4), ENG_F32, 93, -1, 1),
               *i = t_rand_tensor(SHAPE(2, 3), ENG_I64, 94, 0, 3),
               *h = t_rand_tensor(SHAPE(2, 3), ENG_F16, 95, -1, 1),
               *bf = t_rand_tensor(SHAPE(2, 3), ENG_BF16, 96, -1, 1), *out = NULL, *o2 = NULL, *o3 = NULL;
  T_FAILS(eng_op_softmax_backward(x4, x, 1, 0, &out), ENG_ERR_SHAPE, "softmax_backward: gy has shape [2,4]");
  T_FAILS(eng_op_softmax_backward(h, x, 1, 0, &out), ENG_ERR_DTYPE, "softmax_backward: gy has dtype f16");
  T_FAILS(eng_op_softmax_backward(x, x, 2, 0, &out), ENG_ERR_INDEX, "softmax_backward");
  T_FAILS(eng_op_rms_norm_backward(x4, x, NULL, 1e-6, &out, &o2), ENG_ERR_SHAPE,
          "rms_norm_backward: gy has shape [2,4] but x has [2,3]");
  T_FAILS(eng_op_rms_norm_backward(x, x, w4, 1e-6, &out, &o2), ENG_ERR_SHAPE,
          "rms_norm_backward: weight has shape [4]");
  T_FAILS(eng_op_layer_norm_backward(i, x, NULL, NULL, 1e-5, &out, &o2, &o3), ENG_ERR_DTYPE,
          "layer_norm_backward: gy must have a floating dtype, got i64");
  T_FAILS(eng_op_layer_norm_backward(x, NULL, NULL, NULL, 1e-5, &out, &o2, &o3), ENG_ERR_ARG,
          "layer_norm_backward: input 2 is missing");
  double tv[2] = {1, 3}, g2[2] = {1, 1};
  eng_tensor_t *t = t_tensor(tv, SHAPE(2), ENG_I64), *gl2 = t_tensor(g2, SHAPE(2), ENG_F32);
  eng_tensor_t *gl = t_tensor(g2, SHAPE(1), ENG_F32);
  T_FAILS(eng_op_cross_entropy_backward(x, t, gl, -100, &out), ENG_ERR_INDEX,
          "cross_entropy_backward: target 3 (at 1) is out of range for 3 classes");
  T_FAILS(eng_op_cross_entropy_backward(x, t, gl2, -100, &out), ENG_ERR_SHAPE,
          "cross_entropy_backward: gloss must be a one-element floating tensor, got f32 [2]");
  T_FAILS(eng_op_cross_entropy_backward(x, x, gl, -100, &out), ENG_ERR_DTYPE,
          "cross_entropy_backward: targets must have an integer dtype");
  T_FAILS(eng_op_add_rms_norm(bf, h, NULL, 1e-6, &out, &o2), ENG_ERR_DTYPE,
          "add_rms_norm: residual must be f32, f64 or x's dtype bf16, got f16");
  T_FAILS(eng_op_add_rms_norm(x, x4, NULL, 1e-6, &out, &o2), ENG_ERR_SHAPE,
          "add_rms_norm: residual has shape [2,4] but x has [2,3]");
  cr_assert_null(out);
  eng_tensor_t *all[] = {x, x4, w4, i, h, bf, t, gl2, gl};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) eng_tensor_release(all[k]);
}
