/* The E1 op on the CPU: the forward against a tiny double implementation written here, the
 * backward against central finite differences of the forward (f64, every input, h0 included),
 * the other dtypes against f64, and the argument checks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static eng_tensor_t *rnd(int64_t a, int64_t b, int64_t c, int nd, eng_dtype_t dt, uint64_t seed,
                         double lo, double hi) {
  const int64_t s[3] = {a, b, c};
  return t_rand_tensor(s, nd, dt, seed, lo, hi);
}

typedef struct {
  int64_t B, T, d;
  eng_tensor_t *xw, *z, *W, *b, *h0; /* h0 may be NULL */
} e1_in_t;

static e1_in_t make_inputs(int64_t B, int64_t T, int64_t d, int with_h0, eng_dtype_t dt,
                           uint64_t seed) {
  e1_in_t in = {B, T, d, NULL, NULL, NULL, NULL, NULL};
  in.xw = rnd(B, T, d, 3, dt, seed + 1, -1, 1);
  in.z = rnd(B, T, d, 3, dt, seed + 2, -2, 2);
  in.W = rnd(d, d, 0, 2, dt, seed + 3, -0.6, 0.6);
  in.b = rnd(d, 0, 0, 1, dt, seed + 4, -0.5, 0.5);
  if (with_h0) in.h0 = rnd(B, d, 0, 2, dt, seed + 5, -0.9, 0.9);
  return in;
}

static void release_inputs(e1_in_t *in) {
  eng_tensor_t *all[] = {in->xw, in->z, in->W, in->b, in->h0};
  for (int k = 0; k < 5; k++) eng_tensor_release(all[k]);
}

/* The reference: the cell written out per element, one batch row and one step at a time. */
static void reference(const e1_in_t *in, double *y, double *hT) {
  const int64_t B = in->B, T = in->T, d = in->d;
  double *xw = t_values(in->xw), *z = t_values(in->z), *W = t_values(in->W), *b = t_values(in->b);
  double *h0 = in->h0 ? t_values(in->h0) : NULL;
  double *h = calloc((size_t)d, sizeof(double)), *hn = calloc((size_t)d, sizeof(double));
  for (int64_t bi = 0; bi < B; bi++) {
    for (int64_t i = 0; i < d; i++) h[i] = h0 ? h0[bi * d + i] : 0;
    for (int64_t t = 0; t < T; t++) {
      for (int64_t i = 0; i < d; i++) {
        double acc = b[i] + xw[(bi * T + t) * d + i];
        for (int64_t j = 0; j < d; j++) acc += W[i * d + j] * h[j];
        hn[i] = tanh(acc);
      }
      for (int64_t i = 0; i < d; i++) {
        double zz = z[(bi * T + t) * d + i];
        h[i] = hn[i];
        y[(bi * T + t) * d + i] = hn[i] * zz / (1 + exp(-zz));
      }
    }
    memcpy(hT + bi * d, h, sizeof(double) * (size_t)d);
  }
  free(xw), free(z), free(W), free(b), free(h0), free(h), free(hn);
}

static void check_forward(int64_t B, int64_t T, int64_t d, int with_h0, eng_dtype_t dt) {
  e1_in_t in = make_inputs(B, T, d, with_h0, dt, 100 + (uint64_t)(B * 7 + T * 3 + d));
  eng_tensor_t *y = NULL, *hT = NULL, *hs = NULL;
  T_OK(eng_op_e1(in.xw, in.z, in.W, in.b, in.h0, &y, &hT, &hs));
  double *ry = malloc(sizeof(double) * (size_t)(B * T * d)),
         *rh = malloc(sizeof(double) * (size_t)(B * d));
  reference(&in, ry, rh);
  cr_assert_eq(y->dtype, dt);
  cr_assert(y->ndim == 3 && y->shape[0] == B && y->shape[1] == T && y->shape[2] == d);
  cr_assert(hT->ndim == 2 && hT->shape[0] == B && hT->shape[1] == d);
  double ey = t_rel_err(y, ry, B * T * d), eh = t_rel_err(hT, rh, B * d);
  /* f32/f16/bf16 values are computed in f64 from their stored values and rounded once */
  double tol = t_tol(dt);
  cr_assert(ey <= tol && eh <= tol, "e1 %s B=%lld T=%lld d=%lld: rel err y %g, h_T %g",
            eng_dtype_name(dt), (long long)B, (long long)T, (long long)d, ey, eh);
  /* hs's last step is h_T */
  double *hsv = t_values(hs), *hTv = t_values(hT);
  for (int64_t bi = 0; bi < B; bi++)
    for (int64_t i = 0; i < d; i++) cr_assert_eq(hsv[(bi * T + T - 1) * d + i], hTv[bi * d + i]);
  free(hsv), free(hTv), free(ry), free(rh);
  eng_tensor_release(y), eng_tensor_release(hT), eng_tensor_release(hs);
  release_inputs(&in);
}

Test(e1, forward_matches_reference) {
  for (int k = 0; k < 4; k++) {
    eng_dtype_t dt = (eng_dtype_t[]){ENG_F64, ENG_F32, ENG_F16, ENG_BF16}[k];
    check_forward(2, 5, 4, 1, dt);
    check_forward(3, 1, 7, 0, dt);
    check_forward(1, 17, 33, 1, dt);
  }
}

/* L = sum(gy * y) + sum(ghT * h_T) */
static double loss(const e1_in_t *in, const double *gy, const double *ghT) {
  eng_tensor_t *y = NULL, *hT = NULL;
  T_OK(eng_op_e1(in->xw, in->z, in->W, in->b, in->h0, &y, &hT, NULL));
  const double *yv = eng_tensor_data(y), *hv = eng_tensor_data(hT);
  double L = 0;
  for (int64_t k = 0; k < in->B * in->T * in->d; k++) L += gy[k] * yv[k];
  for (int64_t k = 0; k < in->B * in->d; k++) L += ghT[k] * hv[k];
  eng_tensor_release(y), eng_tensor_release(hT);
  return L;
}

static void gradcheck(int64_t B, int64_t T, int64_t d, int with_h0, int with_ghT) {
  e1_in_t in = make_inputs(B, T, d, 1, ENG_F64, 900 + (uint64_t)(T * 11 + d));
  if (!with_h0) {
    eng_tensor_t *zero = NULL;
    const int64_t s[2] = {B, d};
    T_OK(eng_tensor_zeros(s, 2, ENG_F64, ENG_CPU_DEVICE, &zero));
    eng_tensor_release(in.h0);
    in.h0 = zero; /* perturbed below: the gradient at h0 = 0 equals the no-h0 case's dh0 */
  }
  eng_tensor_t *gy = rnd(B, T, d, 3, ENG_F64, 31, -1, 1),
               *ghT = rnd(B, d, 0, 2, ENG_F64, 32, -1, 1);
  double *gyv = t_values(gy), *ghv = t_values(ghT);
  if (!with_ghT) memset(ghv, 0, sizeof(double) * (size_t)(B * d));
  eng_tensor_t *y = NULL, *hT = NULL, *hs = NULL, *g[5] = {NULL};
  T_OK(eng_op_e1(in.xw, in.z, in.W, in.b, with_h0 ? in.h0 : NULL, &y, &hT, &hs));
  T_OK(eng_op_e1_backward(in.z, in.W, with_h0 ? in.h0 : NULL, hs, gy, with_ghT ? ghT : NULL, &g[0],
                          &g[1], &g[2], &g[3], &g[4]));
  eng_tensor_t *x[5] = {in.xw, in.z, in.W, in.b, in.h0};
  static const char *const names[5] = {"xw", "z", "W_h", "b", "h0"};
  for (int k = 0; k < 5; k++) {
    double *p = eng_tensor_data(x[k]);
    int64_t n = eng_tensor_numel(x[k]);
    cr_assert_eq(eng_tensor_numel(g[k]), n, "%s: gradient has the wrong size", names[k]);
    double *fd = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
      const double keep = p[i], h = 1e-6;
      p[i] = keep + h;
      double lp = loss(&in, gyv, ghv);
      p[i] = keep - h;
      double lm = loss(&in, gyv, ghv);
      p[i] = keep;
      fd[i] = (lp - lm) / (2 * h);
    }
    double err = t_rel_err(g[k], fd, n);
    cr_assert(err < 1e-7,
              "e1 d%s (B=%lld T=%lld d=%lld h0 %d dh_T %d): rel err %g vs finite differences",
              names[k], (long long)B, (long long)T, (long long)d, with_h0, with_ghT, err);
    free(fd);
  }
  for (int k = 0; k < 5; k++) eng_tensor_release(g[k]);
  eng_tensor_release(y), eng_tensor_release(hT), eng_tensor_release(hs);
  eng_tensor_release(gy), eng_tensor_release(ghT);
  free(gyv), free(ghv);
  release_inputs(&in);
}

Test(e1, backward_matches_finite_differences) {
  gradcheck(2, 5, 4, 1, 1);
  gradcheck(1, 1, 3, 1, 1);
  gradcheck(3, 7, 5, 0, 0);
  gradcheck(2, 20, 3, 1, 0);
}

Test(e1, long_sequences_stay_finite) {
  e1_in_t in = make_inputs(2, 4096, 8, 1, ENG_F32, 5);
  eng_tensor_t *y = NULL, *hT = NULL;
  T_OK(eng_op_e1(in.xw, in.z, in.W, in.b, in.h0, &y, &hT, NULL));
  double *v = t_values(y);
  for (int64_t k = 0; k < eng_tensor_numel(y); k++)
    cr_assert(isfinite(v[k]), "y[%lld] = %g", (long long)k, v[k]);
  free(v);
  eng_tensor_release(y), eng_tensor_release(hT);
  release_inputs(&in);
}

Test(e1, bad_arguments_are_errors) {
  e1_in_t in = make_inputs(2, 3, 4, 1, ENG_F32, 7);
  eng_tensor_t *y = NULL, *hT = NULL, *Wbad = rnd(4, 5, 0, 2, ENG_F32, 1, -1, 1);
  eng_tensor_t *b64 = rnd(4, 0, 0, 1, ENG_F64, 2, -1, 1), *ids = NULL;
  T_FAILS(eng_op_e1(in.xw, in.z, Wbad, in.b, NULL, &y, &hT, NULL), ENG_ERR_SHAPE,
          "W_h has shape [4,5]");
  T_FAILS(eng_op_e1(in.xw, in.z, in.W, b64, NULL, &y, &hT, NULL), ENG_ERR_DTYPE, "b has dtype f64");
  T_FAILS(eng_op_e1(in.xw, in.z, in.W, NULL, NULL, &y, &hT, NULL), ENG_ERR_ARG,
          "input 4 is missing");
  T_FAILS(eng_op_e1(in.b, in.z, in.W, in.b, NULL, &y, &hT, NULL), ENG_ERR_SHAPE,
          "xw must be [B,T,d]");
  const int64_t s[3] = {2, 3, 4};
  T_OK(eng_tensor_zeros(s, 3, ENG_I64, ENG_CPU_DEVICE, &ids));
  T_FAILS(eng_op_e1(ids, in.z, in.W, in.b, NULL, &y, &hT, NULL), ENG_ERR_DTYPE, "floating");
  T_FAILS(eng_op_e1_backward(in.z, in.W, NULL, in.xw, in.z, in.b, NULL, NULL, NULL, NULL, NULL),
          ENG_ERR_SHAPE, "dh_T has shape [4]");
  eng_tensor_release(Wbad), eng_tensor_release(b64), eng_tensor_release(ids);
  release_inputs(&in);
}
