/* The E23 op on the CPU: the forward against a tiny double implementation written here (tape,
 * attention read and write spelled out), the checkpoints and the a, r, w trace (against that
 * implementation, and by stepping the tape with the trace alone), the backward against central
 * finite differences of the forward (f64, every input, h0 and tape0 included, T not a multiple of
 * the checkpoint interval), the other dtypes against f64, and the argument checks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static eng_tensor_t *rnd(const int64_t *s, int nd, eng_dtype_t dt, uint64_t seed, double lo,
                         double hi) {
  return t_rand_tensor(s, nd, dt, seed, lo, hi);
}

typedef struct {
  int64_t B, T, N, d;
  eng_tensor_t *xw, *Wh, *Ww, *b, *h0, *tape0; /* h0, tape0 may be NULL */
} e23_in_t;

static e23_in_t make_inputs(int64_t B, int64_t T, int64_t N, int64_t d, int with_state,
                            eng_dtype_t dt, uint64_t seed) {
  e23_in_t in = {B, T, N, d, NULL, NULL, NULL, NULL, NULL, NULL};
  const int64_t seq[3] = {B, T, d}, sq[2] = {d, d}, row[2] = {B, d}, tape[3] = {B, N, d};
  in.xw = rnd(seq, 3, dt, seed + 1, -1, 1);
  in.Wh = rnd(sq, 2, dt, seed + 2, -0.6, 0.6);
  in.Ww = rnd(sq, 2, dt, seed + 3, -0.8, 0.8);
  in.b = rnd(&d, 1, dt, seed + 4, -0.5, 0.5);
  if (with_state) {
    in.h0 = rnd(row, 2, dt, seed + 5, -0.9, 0.9);
    in.tape0 = rnd(tape, 3, dt, seed + 6, -1.5, 1.5);
  }
  return in;
}

static void release_inputs(e23_in_t *in) {
  eng_tensor_t *all[] = {in->xw, in->Wh, in->Ww, in->b, in->h0, in->tape0};
  for (int k = 0; k < 6; k++) eng_tensor_release(all[k]);
}

/* softmax of v [n] into p */
static void softmax(const double *v, int64_t n, double *p) {
  double mx = v[0], s = 0;
  for (int64_t i = 1; i < n; i++) mx = fmax(mx, v[i]);
  for (int64_t i = 0; i < n; i++) s += p[i] = exp(v[i] - mx);
  for (int64_t i = 0; i < n; i++) p[i] /= s;
}

/* ckpt's row length: the checkpoints [ceil(T/C)][N][d], then a [T][N], r [T][N], w [T][d]. */
static int64_t ckpt_len(int64_t T, int64_t N, int64_t d, int64_t C) {
  return (T + C - 1) / C * N * d + T * (2 * N + d);
}

/* The reference forward; ck (may be NULL) receives the tape before every step [B,T,N,d], tr (may
 * be NULL) the step's a [N], r [N] and w [d], [B,T,2N+d]. */
static void reference(const e23_in_t *in, double *hs, double *hT, double *tapeT, double *ck,
                      double *tr) {
  const int64_t B = in->B, T = in->T, N = in->N, d = in->d;
  double *xw = t_values(in->xw), *Wh = t_values(in->Wh), *Ww = t_values(in->Ww),
         *b = t_values(in->b);
  double *h0 = in->h0 ? t_values(in->h0) : NULL, *t0 = in->tape0 ? t_values(in->tape0) : NULL;
  double *H = malloc(sizeof(double) * (size_t)(N * d)), *h = malloc(sizeof(double) * (size_t)d);
  double *hn = malloc(sizeof(double) * (size_t)d), *w = malloc(sizeof(double) * (size_t)d);
  double *s = malloc(sizeof(double) * (size_t)N), *r = malloc(sizeof(double) * (size_t)N);
  double *a = malloc(sizeof(double) * (size_t)N);
  const double scale = 1 / sqrt((double)d);
  for (int64_t bi = 0; bi < B; bi++) {
    for (int64_t k = 0; k < N * d; k++) H[k] = t0 ? t0[bi * N * d + k] : 0;
    for (int64_t j = 0; j < d; j++) h[j] = h0 ? h0[bi * d + j] : 0;
    for (int64_t t = 0; t < T; t++) {
      if (ck) memcpy(ck + (bi * T + t) * N * d, H, sizeof(double) * (size_t)(N * d));
      for (int64_t i = 0; i < N; i++) {
        s[i] = 0;
        for (int64_t j = 0; j < d; j++) s[i] += H[i * d + j] * h[j] * scale;
      }
      softmax(s, N, r);
      for (int64_t j = 0; j < d; j++) {
        double acc = xw[(bi * T + t) * d + j] + b[j];
        for (int64_t k = 0; k < d; k++) acc += Wh[j * d + k] * h[k];
        for (int64_t i = 0; i < N; i++) acc += r[i] * H[i * d + j];
        hn[j] = tanh(acc);
      }
      for (int64_t j = 0; j < d; j++) {
        w[j] = 0;
        for (int64_t k = 0; k < d; k++) w[j] += Ww[j * d + k] * hn[k];
      }
      for (int64_t i = 0; i < N; i++) {
        s[i] = 0;
        for (int64_t j = 0; j < d; j++) s[i] += H[i * d + j] * hn[j] * scale;
      }
      softmax(s, N, a);
      if (tr) {
        double *at = tr + (bi * T + t) * (2 * N + d);
        memcpy(at, a, sizeof(double) * (size_t)N);
        memcpy(at + N, r, sizeof(double) * (size_t)N);
        memcpy(at + 2 * N, w, sizeof(double) * (size_t)d);
      }
      for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < d; j++) H[i * d + j] += a[i] * (w[j] - H[i * d + j]);
      memcpy(h, hn, sizeof(double) * (size_t)d);
      memcpy(hs + (bi * T + t) * d, h, sizeof(double) * (size_t)d);
    }
    memcpy(hT + bi * d, h, sizeof(double) * (size_t)d);
    memcpy(tapeT + bi * N * d, H, sizeof(double) * (size_t)(N * d));
  }
  free(xw), free(Wh), free(Ww), free(b), free(h0), free(t0);
  free(H), free(h), free(hn), free(w), free(s), free(r), free(a);
}

static void check_forward(int64_t B, int64_t T, int64_t N, int64_t d, int64_t C, int with_state,
                          eng_dtype_t dt) {
  e23_in_t in = make_inputs(B, T, N, d, with_state, dt, 300 + (uint64_t)(B + T * 5 + N * 7 + d));
  eng_tensor_t *hs = NULL, *hT = NULL, *tT = NULL, *ck = NULL;
  T_OK(eng_op_e23(in.xw, in.Wh, in.Ww, in.b, in.h0, in.tape0, N, C, &hs, &hT, &tT, &ck));
  double *rhs = malloc(sizeof(double) * (size_t)(B * T * d)),
         *rhT = malloc(sizeof(double) * (size_t)(B * d));
  double *rtT = malloc(sizeof(double) * (size_t)(B * N * d)),
         *rck = malloc(sizeof(double) * (size_t)(B * T * N * d)),
         *rtr = malloc(sizeof(double) * (size_t)(B * T * (2 * N + d)));
  reference(&in, rhs, rhT, rtT, rck, rtr);
  const int64_t K = (T + C - 1) / C, W = ckpt_len(T, N, d, C);
  cr_assert(ck->ndim == 2 && ck->shape[0] == B && ck->shape[1] == W);
  cr_assert_eq(ck->dtype, dt == ENG_F64 ? ENG_F64 : ENG_F32);
  cr_assert(tT->ndim == 3 && tT->shape[1] == N && tT->dtype == dt);
  double tol = t_tol(dt);
  double e1 = t_rel_err(hs, rhs, B * T * d), e2 = t_rel_err(hT, rhT, B * d),
         e3 = t_rel_err(tT, rtT, B * N * d);
  cr_assert(e1 <= tol && e2 <= tol && e3 <= tol,
            "e23 %s B=%lld T=%lld N=%lld d=%lld: rel err hs %g, h_T %g, tape_T %g",
            eng_dtype_name(dt), (long long)B, (long long)T, (long long)N, (long long)d, e1, e2, e3);
  /* per row: checkpoint k is the tape before step k*C; then a, r, w of every step */
  double *want = malloc(sizeof(double) * (size_t)(B * W));
  for (int64_t bi = 0; bi < B; bi++) {
    double *row = want + bi * W, *a = row + K * N * d, *r = a + T * N, *w = r + T * N;
    for (int64_t k = 0; k < K; k++)
      memcpy(row + k * N * d, rck + (bi * T + k * C) * N * d, sizeof(double) * (size_t)(N * d));
    for (int64_t t = 0; t < T; t++) {
      const double *at = rtr + (bi * T + t) * (2 * N + d);
      memcpy(a + t * N, at, sizeof(double) * (size_t)N);
      memcpy(r + t * N, at + N, sizeof(double) * (size_t)N);
      memcpy(w + t * d, at + 2 * N, sizeof(double) * (size_t)d);
    }
  }
  double e4 = t_rel_err(ck, want, B * W);
  /* ckpt is f32 (f64) state computed from the stored inputs */
  cr_assert(e4 <= (dt == ENG_F64 ? 1e-12 : 1e-5), "e23 %s: ckpt rel err %g", eng_dtype_name(dt),
            e4);
  free(want), free(rhs), free(rhT), free(rtT), free(rck), free(rtr);
  eng_tensor_release(hs), eng_tensor_release(hT), eng_tensor_release(tT), eng_tensor_release(ck);
  release_inputs(&in);
}

Test(e23, forward_matches_reference) {
  for (int k = 0; k < 4; k++) {
    eng_dtype_t dt = (eng_dtype_t[]){ENG_F64, ENG_F32, ENG_F16, ENG_BF16}[k];
    check_forward(2, 5, 3, 4, 2, 1, dt);
    check_forward(3, 1, 8, 6, 16, 0, dt);
    check_forward(1, 17, 5, 9, 4, 1, dt);
  }
}

/* ckpt's trace against what this test recomputes from the forward's other outputs: w_t = W_write
 * h_t from hs; the tape stepped here from each checkpoint with the trace alone (H <- (1 - a_t) H +
 * a_t w_t^T) must land on the next checkpoint (or tape_T), and on the way r_t = softmax(scale H_t
 * h_{t-1}) and a_t = softmax(scale H_t h_t) with that H_t. */
Test(e23, ckpt_trace_holds_a_r_w) {
  const int64_t B = 2, T = 7, N = 3, d = 5, C = 3, K = (T + C - 1) / C, nd = N * d;
  e23_in_t in = make_inputs(B, T, N, d, 1, ENG_F64, 77);
  eng_tensor_t *hs = NULL, *tT = NULL, *ck = NULL;
  T_OK(eng_op_e23(in.xw, in.Wh, in.Ww, in.b, in.h0, in.tape0, N, C, &hs, NULL, &tT, &ck));
  const int64_t W = ckpt_len(T, N, d, C);
  cr_assert(ck->ndim == 2 && ck->shape[0] == B && ck->shape[1] == W, "ckpt shape");
  const double *hd = eng_tensor_data(hs), *h0 = eng_tensor_data(in.h0),
               *Ww = eng_tensor_data(in.Ww), *td = eng_tensor_data(tT), *cd = eng_tensor_data(ck);
  const double scale = 1 / sqrt((double)d);
  double H[15], sc[3], p[3], err_w = 0, err_r = 0, err_a = 0, err_H = 0, sum_w = 0;
  for (int64_t bi = 0; bi < B; bi++) {
    const double *row = cd + bi * W, *a = row + K * nd, *r = a + T * N, *w = r + T * N;
    for (int64_t seg = 0; seg < K; seg++) {
      memcpy(H, row + seg * nd, sizeof(double) * (size_t)nd);
      for (int64_t t = seg * C; t < (seg + 1) * C && t < T; t++) {
        const double *h = hd + (bi * T + t) * d, *hp = t ? h - d : h0 + bi * d;
        for (int64_t i = 0; i < d; i++) {
          double acc = 0;
          for (int64_t j = 0; j < d; j++) acc += Ww[i * d + j] * h[j];
          err_w = fmax(err_w, fabs(w[t * d + i] - acc));
          sum_w += fabs(acc);
        }
        for (int pass = 0; pass < 2; pass++) { /* r from h_{t-1}, a from h_t */
          const double *v = pass ? h : hp, *got = (pass ? a : r) + t * N;
          for (int64_t i = 0; i < N; i++) {
            sc[i] = 0;
            for (int64_t j = 0; j < d; j++) sc[i] += scale * H[i * d + j] * v[j];
          }
          softmax(sc, N, p);
          double *err = pass ? &err_a : &err_r;
          for (int64_t i = 0; i < N; i++) *err = fmax(*err, fabs(got[i] - p[i]));
        }
        for (int64_t i = 0; i < N; i++)
          for (int64_t j = 0; j < d; j++)
            H[i * d + j] = (1 - a[t * N + i]) * H[i * d + j] + a[t * N + i] * w[t * d + j];
      }
      const double *next = seg + 1 < K ? row + (seg + 1) * nd : td + bi * nd;
      for (int64_t e = 0; e < nd; e++) err_H = fmax(err_H, fabs(H[e] - next[e]));
    }
  }
  cr_assert(sum_w > 0, "an all-zero trace proves nothing");
  cr_assert(err_w < 1e-12 && err_r < 1e-12 && err_a < 1e-12 && err_H < 1e-12,
            "trace: w err %g, r err %g, a err %g, stepped tape err %g", err_w, err_r, err_a, err_H);
  eng_tensor_release(hs), eng_tensor_release(tT), eng_tensor_release(ck);
  release_inputs(&in);
}

/* L = sum(ghs * hs) + sum(ghT * h_T) + sum(gtT * tape_T) */
typedef struct {
  double *ghs, *ghT, *gtT;
} upstream_t;

static double loss(const e23_in_t *in, const upstream_t *u) {
  eng_tensor_t *hs = NULL, *hT = NULL, *tT = NULL;
  T_OK(eng_op_e23(in->xw, in->Wh, in->Ww, in->b, in->h0, in->tape0, in->N, 3, &hs, &hT, &tT, NULL));
  const double *a = eng_tensor_data(hs), *c = eng_tensor_data(hT), *e = eng_tensor_data(tT);
  double L = 0;
  for (int64_t k = 0; k < in->B * in->T * in->d; k++) L += u->ghs[k] * a[k];
  for (int64_t k = 0; k < in->B * in->d; k++) L += u->ghT[k] * c[k];
  for (int64_t k = 0; k < in->B * in->N * in->d; k++) L += u->gtT[k] * e[k];
  eng_tensor_release(hs), eng_tensor_release(hT), eng_tensor_release(tT);
  return L;
}

static void gradcheck(int64_t B, int64_t T, int64_t N, int64_t d, int64_t C, int with_state,
                      int with_final) {
  e23_in_t in = make_inputs(B, T, N, d, 1, ENG_F64, 700 + (uint64_t)(T * 13 + N + d));
  const int64_t seq[3] = {B, T, d}, row[2] = {B, d}, tape[3] = {B, N, d};
  eng_tensor_t *ghs = rnd(seq, 3, ENG_F64, 41, -1, 1), *ghT = rnd(row, 2, ENG_F64, 42, -1, 1);
  eng_tensor_t *gtT = rnd(tape, 3, ENG_F64, 43, -1, 1);
  upstream_t u = {t_values(ghs), t_values(ghT), t_values(gtT)};
  if (!with_final) {
    memset(u.ghT, 0, sizeof(double) * (size_t)(B * d));
    memset(u.gtT, 0, sizeof(double) * (size_t)(B * N * d));
  }
  if (!with_state) { /* the gradients at zero state equal the no-state case's */
    T_OK(eng_tensor_fill_(in.h0, 0));
    T_OK(eng_tensor_fill_(in.tape0, 0));
  }
  eng_tensor_t *hs = NULL, *ck = NULL, *g[6] = {NULL};
  eng_tensor_t *h0 = with_state ? in.h0 : NULL, *t0 = with_state ? in.tape0 : NULL;
  T_OK(eng_op_e23(in.xw, in.Wh, in.Ww, in.b, h0, t0, N, C, &hs, NULL, NULL, &ck));
  T_OK(eng_op_e23_backward(in.xw, in.Wh, in.Ww, in.b, h0, hs, ck, ghs, with_final ? ghT : NULL,
                           with_final ? gtT : NULL, C, &g[0], &g[1], &g[2], &g[3], &g[4], &g[5]));
  eng_tensor_t *x[6] = {in.xw, in.Wh, in.Ww, in.b, in.h0, in.tape0};
  static const char *const names[6] = {"xw", "W_h", "W_write", "b", "h0", "tape0"};
  for (int k = 0; k < 6; k++) {
    double *p = eng_tensor_data(x[k]);
    int64_t n = eng_tensor_numel(x[k]);
    cr_assert_eq(eng_tensor_numel(g[k]), n, "%s: gradient has the wrong size", names[k]);
    double *fd = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
      const double keep = p[i], h = 1e-6;
      p[i] = keep + h;
      double lp = loss(&in, &u);
      p[i] = keep - h;
      double lm = loss(&in, &u);
      p[i] = keep;
      fd[i] = (lp - lm) / (2 * h);
    }
    double err = t_rel_err(g[k], fd, n);
    cr_assert(err < 1e-7,
              "e23 d%s (B=%lld T=%lld N=%lld d=%lld C=%lld state %d final grads %d): rel err %g vs "
              "finite differences",
              names[k], (long long)B, (long long)T, (long long)N, (long long)d, (long long)C,
              with_state, with_final, err);
    free(fd);
  }
  for (int k = 0; k < 6; k++) eng_tensor_release(g[k]);
  eng_tensor_release(hs), eng_tensor_release(ck);
  eng_tensor_release(ghs), eng_tensor_release(ghT), eng_tensor_release(gtT);
  free(u.ghs), free(u.ghT), free(u.gtT);
  release_inputs(&in);
}

Test(e23, backward_matches_finite_differences) {
  gradcheck(2, 7, 3, 4, 3, 1, 1); /* T not a multiple of C */
  gradcheck(1, 1, 4, 3, 3, 1, 1); /* T = 1 */
  gradcheck(2, 6, 2, 3, 2, 0, 0); /* no state, no final gradients */
  gradcheck(1, 20, 3, 3, 16, 1, 0);
}

Test(e23, long_sequences_stay_finite) {
  e23_in_t in = make_inputs(2, 4096, 8, 8, 1, ENG_F32, 9);
  eng_tensor_t *hs = NULL, *tT = NULL;
  T_OK(eng_op_e23(in.xw, in.Wh, in.Ww, in.b, in.h0, in.tape0, 8, 64, &hs, NULL, &tT, NULL));
  double *v = t_values(hs), *w = t_values(tT);
  for (int64_t k = 0; k < eng_tensor_numel(hs); k++)
    cr_assert(isfinite(v[k]), "hs[%lld] = %g", (long long)k, v[k]);
  for (int64_t k = 0; k < eng_tensor_numel(tT); k++)
    cr_assert(isfinite(w[k]), "tape_T[%lld] = %g", (long long)k, w[k]);
  free(v), free(w);
  eng_tensor_release(hs), eng_tensor_release(tT);
  release_inputs(&in);
}

Test(e23, bad_arguments_are_errors) {
  e23_in_t in = make_inputs(2, 5, 3, 4, 1, ENG_F32, 11);
  eng_tensor_t *hs = NULL, *ck = NULL;
  T_FAILS(eng_op_e23(in.xw, in.Wh, in.Ww, in.b, NULL, NULL, 0, 4, &hs, NULL, NULL, NULL),
          ENG_ERR_ARG, "n_slots must be >= 1");
  T_FAILS(eng_op_e23(in.xw, in.Wh, in.Ww, in.b, NULL, in.tape0, 5, 4, &hs, NULL, NULL, NULL),
          ENG_ERR_SHAPE, "tape0 has shape [2,3,4] but must be [2,5,4]");
  T_FAILS(eng_op_e23(in.xw, in.Wh, in.Ww, in.b, NULL, NULL, 3, 0, &hs, NULL, NULL, NULL),
          ENG_ERR_ARG, "checkpoint interval");
  T_FAILS(eng_op_e23(in.xw, in.Wh, in.b, in.b, NULL, NULL, 3, 4, &hs, NULL, NULL, NULL),
          ENG_ERR_SHAPE, "W_write has shape [4]");
  /* n_slots from tape0 */
  T_OK(eng_op_e23(in.xw, in.Wh, in.Ww, in.b, in.h0, in.tape0, 0, 4, &hs, NULL, NULL, &ck));
  cr_assert_eq(ck->shape[1], ckpt_len(5, 3, 4, 4)); /* 74 */
  eng_tensor_t *g = NULL;
  /* C = 2 wants W = 3*4*N + 5*(2N + 4) = 22N + 20: none fits 74 */
  T_FAILS(eng_op_e23_backward(in.xw, in.Wh, in.Ww, in.b, in.h0, hs, ck, hs, NULL, NULL, 2, &g, NULL,
                              NULL, NULL, NULL, NULL),
          ENG_ERR_SHAPE, "ckpt has shape [2,74] but must be [B, W] = [2, W] with W = "
          "ceil(T/C)*N*d + T*(2N + d) = 22*N + 20 for some N >= 1");
  /* the right C gives N = 3 from W: dtape_T must agree */
  eng_tensor_t *t2 = rnd((const int64_t[]){2, 2, 4}, 3, ENG_F32, 12, -1, 1);
  T_FAILS(eng_op_e23_backward(in.xw, in.Wh, in.Ww, in.b, in.h0, hs, ck, hs, NULL, t2, 4, &g, NULL,
                              NULL, NULL, NULL, NULL),
          ENG_ERR_SHAPE, "dtape_T has shape [2,2,4] but must be [2,3,4]");
  eng_tensor_release(t2);
  eng_tensor_release(hs), eng_tensor_release(ck);
  release_inputs(&in);
}
