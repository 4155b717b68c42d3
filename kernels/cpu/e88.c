/* E88 forward and backward in plain loops (see e88.h for the math and layouts). The forward also
 * writes ckpt's trace (delta and o of every step). The backward is exact reverse mode: each
 * checkpointed segment is replayed forward from its checkpoint with the saved delta, keeping every
 * state of the segment, then walked backward step by step, taking o from the trace. It reads
 * delta and o only from ckpt, so the CPU and CUDA backwards agree on any ckpt given to both. */
#include "cpu/e88.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/block_io.h"
#include "cpu/nd_iter.h"

#define E88_EPS 1e-6

/* The element offset of row (b, t, h) of a [B,T,H,w] tensor. */
static inline int64_t row_at(const eng_e88_shape_t *s, int64_t b, int64_t t, int64_t h, int64_t w) {
  return ((b * s->T + t) * s->H + h) * w;
}

static double load1(const void *x, eng_dtype_t dt, int64_t at) {
  double d;
  eng_kcpu_load_f64(&d, x, dt, at, 1, 1);
  return d;
}

static void store1(void *x, eng_dtype_t dt, int64_t at, double d) {
  eng_kcpu_store_f64(x, dt, at, 1, &d, 1);
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* x <- x / (|x| + eps) when l2; returns |x|. */
static double normalize(double *x, int64_t n, int l2) {
  double ss = 0;
  for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
  double a = sqrt(ss);
  if (l2) {
    double inv = 1.0 / (a + E88_EPS);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
  }
  return a;
}

/* dx from dx^ (in place) for x^ = x / (a + eps), a = |x|:
 * dx = dx^ / d - x (x . dx^) / (a d^2), d = a + eps (the second term is 0 at x = 0). */
static void normalize_backward(const double *x, double a, double *dx, int64_t n) {
  double d = a + E88_EPS, dot = 0;
  for (int64_t i = 0; i < n; i++) dot += x[i] * dx[i];
  double c = a > 0 ? dot / (a * d * d) : 0;
  for (int64_t i = 0; i < n; i++) dx[i] = dx[i] / d - x[i] * c;
}

/* S [n, v] <- tanh(dec S + kh delta^T) (no tanh when linear). */
static void apply_delta(double *S, const double *kh, const double *delta, double dec, int64_t n,
                        int64_t v, int linear) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < v; j++) {
      double p = dec * S[i * v + j] + kh[i] * delta[j];
      S[i * v + j] = linear ? p : tanh(p);
    }
}

typedef struct {
  eng_dtype_t dt, sdt;
  const eng_e88_shape_t *s;
  const void *q, *k, *v, *decay, *g;
} inputs_t;

/* kh <- k^ of row (b, t, h) (raw k kept in kraw when given); returns |k|. */
static double load_unit(const inputs_t *in, const void *x, int64_t b, int64_t t, int64_t h,
                        double *xh, double *xraw) {
  const eng_e88_shape_t *s = in->s;
  eng_kcpu_load_f64(xh, x, in->dt, row_at(s, b, t, h, s->n), 1, s->n);
  if (xraw) memcpy(xraw, xh, sizeof(double) * (size_t)s->n);
  return normalize(xh, s->n, s->l2);
}

/* The offset of (b, h)'s row in ckpt. */
static inline int64_t ckpt_row(const eng_e88_shape_t *s, int64_t bh) {
  return bh * eng_e88_ckpt_len(s);
}

/* Per-thread scratch, in doubles. */
static int64_t scratch_len(const eng_e88_shape_t *s) {
  const int64_t nv = s->n * s->v, seg = s->ckpt_every < s->T ? s->ckpt_every : s->T;
  return (seg + 1) * nv + 2 * nv + 6 * s->n + 6 * s->v;
}

static void forward_bh(const inputs_t *in, const void *S0, void *y, void *S_T, void *ckpt,
                       int64_t bh, double *w) {
  const eng_e88_shape_t *s = in->s;
  const int64_t n = s->n, v = s->v, nv = n * v, b = bh / s->H, h = bh % s->H;
  const int64_t C = s->ckpt_every, row = ckpt_row(s, bh);
  double *S = w, *kh = S + nv, *qh = kh + n, *vt = qh + n, *delta = vt + v, *o = delta + v,
         *out = o + v;
  if (S0)
    eng_kcpu_load_f64(S, S0, in->sdt, bh * nv, 1, nv);
  else
    memset(S, 0, sizeof(double) * (size_t)nv);
  for (int64_t t = 0; t < s->T; t++) {
    if (ckpt && t % C == 0) eng_kcpu_store_f64(ckpt, in->sdt, row + (t / C) * nv, 1, S, nv);
    const int64_t vrow = row_at(s, b, t, h, v);
    load_unit(in, in->k, b, t, h, kh, NULL);
    eng_kcpu_load_f64(vt, in->v, in->dt, vrow, 1, v);
    for (int64_t j = 0; j < v; j++) {
      double r = 0;
      for (int64_t i = 0; i < n; i++) r += S[i * v + j] * kh[i];
      delta[j] = vt[j] - r;
    }
    apply_delta(S, kh, delta, load1(in->decay, in->dt, row_at(s, b, t, h, 1)), n, v,
                s->linear_state);
    load_unit(in, in->q, b, t, h, qh, NULL);
    for (int64_t j = 0; j < v; j++) {
      o[j] = 0;
      for (int64_t i = 0; i < n; i++) o[j] += S[i * v + j] * qh[i];
      out[j] = o[j];
      if (in->g) {
        double gj = load1(in->g, in->dt, vrow + j);
        out[j] *= gj * sigmoid(gj);
      }
    }
    eng_kcpu_store_f64(y, in->dt, vrow, 1, out, v);
    if (ckpt) {
      eng_kcpu_store_f64(ckpt, in->sdt, row + eng_e88_ckpt_delta_at(s) + t * v, 1, delta, v);
      eng_kcpu_store_f64(ckpt, in->sdt, row + eng_e88_ckpt_o_at(s) + t * v, 1, o, v);
    }
  }
  if (S_T) eng_kcpu_store_f64(S_T, in->sdt, bh * nv, 1, S, nv);
}

/* Runs CALL for every (b, h) with `w` its thread's scratch, in parallel when the work is large
 * (small calls, as in the gradient checks, would spend their time waking threads); returns -1 from
 * the caller when the scratch cannot be allocated. */
#define FOR_EACH_BH(s, CALL)                                                                  \
  do {                                                                                        \
    const int64_t nbh_ = (s)->B * (s)->H, len_ = scratch_len(s);                             \
    const int par_ = nbh_ > 1 && nbh_ * (s)->T * (s)->n * (s)->v >= ENG_KCPU_PARALLEL_MIN;    \
    const int nth_ = !par_ ? 1 : nbh_ < omp_get_max_threads() ? (int)nbh_                     \
                                                               : omp_get_max_threads();       \
    double *all_ = malloc(sizeof(double) * (size_t)(len_ * nth_));                            \
    if (!all_) return -1;                                                                     \
    _Pragma("omp parallel for schedule(dynamic, 1) num_threads(nth_) if (par_)")              \
    for (int64_t bh = 0; bh < nbh_; bh++) {                                                   \
      double *w = all_ + len_ * omp_get_thread_num();                                         \
      CALL;                                                                                   \
    }                                                                                         \
    free(all_);                                                                               \
  } while (0)

int eng_kcpu_e88_forward(eng_dtype_t dt, eng_dtype_t sdt, const eng_e88_shape_t *s, const void *q,
                         const void *k, const void *v, const void *decay, const void *g,
                         const void *S0, void *y, void *S_T, void *ckpt) {
  inputs_t in = {dt, sdt, s, q, k, v, decay, g};
  FOR_EACH_BH(s, forward_bh(&in, S0, y, S_T, ckpt, bh, w));
  return 0;
}

typedef struct {
  const void *ckpt, *dy, *dS_T;
  void *dq, *dk, *dv, *ddecay, *dg, *dS0;
} grads_t;

/* Backward through step t, given S_prev (before it) and S_new (after it), and delta and o of the
 * step from ckpt; dS holds dL/dS_new on entry and dL/dS_prev on return. */
static void backward_step(const inputs_t *in, const grads_t *gr, int64_t bh, int64_t t,
                          const double *Sp, const double *Sn, double *dS, double *w) {
  const eng_e88_shape_t *s = in->s;
  const int64_t n = s->n, v = s->v, nv = n * v, b = bh / s->H, h = bh % s->H;
  double *dP = w, *kh = dP + nv, *qh = kh + n, *kraw = qh + n, *qraw = kraw + n, *dkh = qraw + n,
         *dqh = dkh + n, *delta = dqh + n, *o = delta + v, *dyt = o + v, *dov = dyt + v,
         *dgv = dov + v, *ddl = dgv + v;
  const double ka = load_unit(in, in->k, b, t, h, kh, kraw);
  const double qa = load_unit(in, in->q, b, t, h, qh, qraw);
  const int64_t vrow = row_at(s, b, t, h, v), at1 = row_at(s, b, t, h, 1), row = ckpt_row(s, bh);
  eng_kcpu_load_f64(delta, gr->ckpt, in->sdt, row + eng_e88_ckpt_delta_at(s) + t * v, 1, v);
  eng_kcpu_load_f64(o, gr->ckpt, in->sdt, row + eng_e88_ckpt_o_at(s) + t * v, 1, v);
  eng_kcpu_load_f64(dyt, gr->dy, in->dt, vrow, 1, v);
  const double dec = load1(in->decay, in->dt, at1);
  for (int64_t j = 0; j < v; j++) {
    if (in->g) {
      double gj = load1(in->g, in->dt, vrow + j), sg = sigmoid(gj);
      dov[j] = dyt[j] * gj * sg;
      dgv[j] = dyt[j] * o[j] * sg * (1 + gj * (1 - sg));
    } else {
      dov[j] = dyt[j];
    }
  }
  /* o = S_new^T q^: into dq^ and dS_new */
  for (int64_t i = 0; i < n; i++) {
    double acc = 0;
    for (int64_t j = 0; j < v; j++) {
      acc += Sn[i * v + j] * dov[j];
      dS[i * v + j] += qh[i] * dov[j];
    }
    dqh[i] = acc;
  }
  /* through the tanh: dP = dS_new (1 - S_new^2) */
  for (int64_t e = 0; e < nv; e++) dP[e] = s->linear_state ? dS[e] : dS[e] * (1 - Sn[e] * Sn[e]);
  double ddec = 0;
  for (int64_t j = 0; j < v; j++) {
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += dP[i * v + j] * kh[i];
    ddl[j] = acc; /* dL/d delta_j = dL/dv_j */
  }
  for (int64_t i = 0; i < n; i++) {
    double acc = 0;
    for (int64_t j = 0; j < v; j++) {
      const double p = dP[i * v + j], sp = Sp[i * v + j];
      ddec += p * sp;
      acc += p * delta[j] - sp * ddl[j];
      dS[i * v + j] = dec * p - kh[i] * ddl[j];
    }
    dkh[i] = acc;
  }
  if (s->l2) {
    normalize_backward(kraw, ka, dkh, n);
    normalize_backward(qraw, qa, dqh, n);
  }
  eng_kcpu_store_f64(gr->dq, in->dt, row_at(s, b, t, h, n), 1, dqh, n);
  eng_kcpu_store_f64(gr->dk, in->dt, row_at(s, b, t, h, n), 1, dkh, n);
  eng_kcpu_store_f64(gr->dv, in->dt, vrow, 1, ddl, v);
  store1(gr->ddecay, in->dt, at1, ddec);
  if (in->g) eng_kcpu_store_f64(gr->dg, in->dt, vrow, 1, dgv, v);
}

static void backward_bh(const inputs_t *in, const grads_t *gr, int64_t bh, double *w) {
  const eng_e88_shape_t *s = in->s;
  const int64_t n = s->n, v = s->v, nv = n * v, b = bh / s->H, h = bh % s->H;
  const int64_t C = s->ckpt_every, nck = eng_e88_n_ckpt(s->T, C), seg_len = C < s->T ? C : s->T;
  const int64_t row = ckpt_row(s, bh);
  /* the layout of scratch_len: seg_len + 1 states, dS, then the step's scratch */
  double *states = w, *dS = states + (seg_len + 1) * nv, *rest = dS + nv;
  if (gr->dS_T)
    eng_kcpu_load_f64(dS, gr->dS_T, in->sdt, bh * nv, 1, nv);
  else
    memset(dS, 0, sizeof(double) * (size_t)nv);
  for (int64_t seg = nck - 1; seg >= 0; seg--) {
    const int64_t t0 = seg * C, t1 = t0 + C < s->T ? t0 + C : s->T;
    /* replay with the saved delta: states[u] is the state before step t0 + u */
    eng_kcpu_load_f64(states, gr->ckpt, in->sdt, row + seg * nv, 1, nv);
    double *kh = rest, *delta = kh + n;
    for (int64_t t = t0; t < t1; t++) {
      double *S = states + (t - t0 + 1) * nv;
      memcpy(S, S - nv, sizeof(double) * (size_t)nv);
      load_unit(in, in->k, b, t, h, kh, NULL);
      eng_kcpu_load_f64(delta, gr->ckpt, in->sdt, row + eng_e88_ckpt_delta_at(s) + t * v, 1, v);
      apply_delta(S, kh, delta, load1(in->decay, in->dt, row_at(s, b, t, h, 1)), n, v,
                  s->linear_state);
    }
    for (int64_t t = t1 - 1; t >= t0; t--) {
      const double *Sp = states + (t - t0) * nv;
      backward_step(in, gr, bh, t, Sp, Sp + nv, dS, rest);
    }
  }
  if (gr->dS0) eng_kcpu_store_f64(gr->dS0, in->sdt, bh * nv, 1, dS, nv);
}

int eng_kcpu_e88_backward(eng_dtype_t dt, eng_dtype_t sdt, const eng_e88_shape_t *s, const void *q,
                          const void *k, const void *v, const void *decay, const void *g,
                          const void *ckpt, const void *dy, const void *dS_T, void *dq, void *dk,
                          void *dv, void *ddecay, void *dg, void *dS0) {
  inputs_t in = {dt, sdt, s, q, k, v, decay, g};
  grads_t gr = {ckpt, dy, dS_T, dq, dk, dv, ddecay, dg, dS0};
  FOR_EACH_BH(s, backward_bh(&in, &gr, bh, w));
  return 0;
}
