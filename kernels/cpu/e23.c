/* E23 forward and backward. One chain per batch row (OpenMP over the batch). The forward's step
 * writes a, r and w straight into the row's trace. The backward replays each segment of C steps
 * from its tape checkpoint (recomputing the weights and writes rather than reading the trace, so
 * it also serves a ckpt that no forward wrote), keeping that segment's tapes, attention weights
 * and writes, then walks it backwards; the weight gradients are sums of outer products after. */
#include "cpu/e23.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/e1.h"

/* p = softmax(scale * H v) over the N slots. */
static void attend(int64_t N, int64_t d, double scale, const double *H, const double *v,
                   double *p) {
  double mx = -INFINITY, sum = 0;
  for (int64_t i = 0; i < N; i++) {
    double s = 0;
    if (v)
      for (int64_t j = 0; j < d; j++) s += H[i * d + j] * v[j];
    p[i] = scale * s;
    mx = p[i] > mx ? p[i] : mx;
  }
  for (int64_t i = 0; i < N; i++) sum += (p[i] = exp(p[i] - mx));
  for (int64_t i = 0; i < N; i++) p[i] /= sum;
}

/* One step: h from hp (NULL: zero) and the tape H, which it then writes. r, a [N] and w [d] are
 * what the backward needs besides H before the write. */
static void step(int64_t N, int64_t d, double *H, const double *hp, const double *xw,
                 const double *Wh, const double *Ww, const double *b, double *h, double *r,
                 double *a, double *w) {
  const double scale = 1.0 / sqrt((double)d);
  attend(N, d, scale, H, hp, r);
  for (int64_t i = 0; i < d; i++) {
    double pre = xw[i] + b[i];
    if (hp)
      for (int64_t j = 0; j < d; j++) pre += Wh[i * d + j] * hp[j];
    for (int64_t k = 0; k < N; k++) pre += r[k] * H[k * d + i];
    h[i] = tanh(pre);
  }
  for (int64_t i = 0; i < d; i++) {
    double acc = 0;
    for (int64_t j = 0; j < d; j++) acc += Ww[i * d + j] * h[j];
    w[i] = acc;
  }
  attend(N, d, scale, H, h, a);
  for (int64_t k = 0; k < N; k++)
    for (int64_t j = 0; j < d; j++) H[k * d + j] = (1.0 - a[k]) * H[k * d + j] + a[k] * w[j];
}

void eng_kcpu_e23_forward(int64_t B, int64_t T, int64_t N, int64_t d, int64_t C, const double *xw,
                          const double *Wh, const double *Ww, const double *b, const double *h0,
                          const double *tape0, double *hs, double *hT, double *tapeT,
                          double *ckpt) {
  const int64_t nd = N * d, W = eng_e23_ckpt_len(T, N, d, C);
  const int64_t a_at = eng_e23_ckpt_a_at(T, N, d, C), r_at = eng_e23_ckpt_r_at(T, N, d, C),
                w_at = eng_e23_ckpt_w_at(T, N, d, C);
#pragma omp parallel for schedule(static) if (B > 1 && B * T * d * (d + N) > 100000)
  for (int64_t bi = 0; bi < B; bi++) {
    double *H = tapeT + bi * nd, *row = ckpt + bi * W;
    if (tape0)
      memcpy(H, tape0 + bi * nd, sizeof(double) * (size_t)nd);
    else
      memset(H, 0, sizeof(double) * (size_t)nd);
    const double *hp = h0 ? h0 + bi * d : NULL;
    for (int64_t t = 0; t < T; t++) {
      if (t % C == 0) memcpy(row + t / C * nd, H, sizeof(double) * (size_t)nd);
      double *h = hs + (bi * T + t) * d;
      step(N, d, H, hp, xw + (bi * T + t) * d, Wh, Ww, b, h, row + r_at + t * N,
           row + a_at + t * N, row + w_at + t * d);
      hp = h;
    }
    for (int64_t i = 0; i < d; i++) hT[bi * d + i] = hp ? hp[i] : 0.0;
  }
}

/* The backward of one batch row. dwseq [T,d] receives dL/dw per step (for dW_write). */
static void backward_row(int64_t T, int64_t N, int64_t d, int64_t C, const double *xw,
                         const double *Wh, const double *Ww, const double *b, const double *h0,
                         const double *hs, const double *ckpt, const double *dhs, const double *dhT,
                         const double *dtapeT, double *dxw, double *dwseq, double *dh0,
                         double *dtape0) {
  const int64_t nd = N * d, K = (T + C - 1) / C;
  const double scale = 1.0 / sqrt((double)d);
  /* one segment: tapes before each step, r, a, w and h of each step */
  double *Hs = malloc(sizeof(double) * (size_t)(C * nd));
  double *rs = malloc(sizeof(double) * (size_t)(C * N)),
         *as = malloc(sizeof(double) * (size_t)(C * N));
  double *ws = malloc(sizeof(double) * (size_t)(C * d)),
         *hseg = malloc(sizeof(double) * (size_t)(C * d));
  double *H = malloc(sizeof(double) * (size_t)nd), *dh = malloc(sizeof(double) * (size_t)d);
  double *dw = malloc(sizeof(double) * (size_t)d), *da = malloc(sizeof(double) * (size_t)N);
  double *dr = malloc(sizeof(double) * (size_t)N);
  double *dH = dtape0, *carry = dh0; /* accumulated in place, final at t = 0 */
  for (int64_t k = 0; k < nd; k++) dH[k] = dtapeT ? dtapeT[k] : 0.0;
  for (int64_t j = 0; j < d; j++) carry[j] = dhT ? dhT[j] : 0.0;
  for (int64_t seg = K - 1; seg >= 0; seg--) {
    const int64_t t0 = seg * C, t1 = t0 + C < T ? t0 + C : T;
    memcpy(H, ckpt + seg * nd, sizeof(double) * (size_t)nd);
    const double *hp0 = t0 > 0 ? hs + (t0 - 1) * d : h0;
    for (int64_t t = t0; t < t1; t++) {
      const int64_t s = t - t0;
      memcpy(Hs + s * nd, H, sizeof(double) * (size_t)nd);
      step(N, d, H, s ? hseg + (s - 1) * d : hp0, xw + t * d, Wh, Ww, b, hseg + s * d, rs + s * N,
           as + s * N, ws + s * d);
    }
    for (int64_t t = t1 - 1; t >= t0; t--) {
      const int64_t s = t - t0;
      const double *Ht = Hs + s * nd, *r = rs + s * N, *a = as + s * N, *w = ws + s * d;
      const double *h = hseg + s * d, *hp = s ? hseg + (s - 1) * d : hp0;
      for (int64_t j = 0; j < d; j++) dh[j] = dhs[t * d + j] + carry[j];
      /* the write H' = (1 - a) H + a w^T */
      double ada = 0;
      for (int64_t i = 0; i < N; i++) {
        double acc = 0;
        for (int64_t j = 0; j < d; j++) acc += dH[i * d + j] * (w[j] - Ht[i * d + j]);
        da[i] = acc;
        ada += a[i] * acc;
      }
      for (int64_t j = 0; j < d; j++) {
        double acc = 0;
        for (int64_t i = 0; i < N; i++) acc += a[i] * dH[i * d + j];
        dw[j] = acc;
      }
      for (int64_t i = 0; i < N; i++) {
        const double dsa = a[i] * (da[i] - ada); /* through a = softmax(scale H h) */
        for (int64_t j = 0; j < d; j++) {
          dh[j] += scale * dsa * Ht[i * d + j];
          dH[i * d + j] = (1.0 - a[i]) * dH[i * d + j] + scale * dsa * h[j];
        }
      }
      for (int64_t j = 0; j < d; j++) { /* w = W_write h */
        double acc = 0;
        for (int64_t i = 0; i < d; i++) acc += Ww[i * d + j] * dw[i];
        dh[j] += acc;
        dwseq[t * d + j] = dw[j];
      }
      double *dpre = dxw + t * d;
      for (int64_t j = 0; j < d; j++) dpre[j] = dh[j] * (1.0 - h[j] * h[j]);
      /* read = H^T r, r = softmax(scale H hp) */
      double rdr = 0;
      for (int64_t i = 0; i < N; i++) {
        double acc = 0;
        for (int64_t j = 0; j < d; j++) {
          acc += Ht[i * d + j] * dpre[j];
          dH[i * d + j] += r[i] * dpre[j];
        }
        dr[i] = acc;
        rdr += r[i] * acc;
      }
      for (int64_t j = 0; j < d; j++) {
        double acc = 0;
        for (int64_t i = 0; i < d; i++) acc += Wh[i * d + j] * dpre[i];
        carry[j] = acc;
      }
      for (int64_t i = 0; i < N; i++) {
        const double dsr = r[i] * (dr[i] - rdr);
        for (int64_t j = 0; j < d; j++) {
          carry[j] += scale * dsr * Ht[i * d + j];
          if (hp) dH[i * d + j] += scale * dsr * hp[j];
        }
      }
    }
  }
  free(Hs), free(rs), free(as), free(ws), free(hseg), free(H), free(dh), free(dw), free(da),
      free(dr);
}

void eng_kcpu_e23_backward(int64_t B, int64_t T, int64_t N, int64_t d, int64_t C, const double *xw,
                           const double *Wh, const double *Ww, const double *b, const double *h0,
                           const double *hs, const double *ckpt, const double *dhs,
                           const double *dhT, const double *dtapeT, double *dxw, double *dWh,
                           double *dWw, double *db, double *dh0, double *dtape0) {
  const int64_t nd = N * d, W = eng_e23_ckpt_len(T, N, d, C);
  double *dwseq = malloc(sizeof(double) * (size_t)(B * T * d));
#pragma omp parallel for schedule(static) if (B > 1 && B * T * d * (d + N) > 100000)
  for (int64_t bi = 0; bi < B; bi++)
    backward_row(T, N, d, C, xw + bi * T * d, Wh, Ww, b, h0 ? h0 + bi * d : NULL, hs + bi * T * d,
                 ckpt + bi * W, dhs + bi * T * d, dhT ? dhT + bi * d : NULL,
                 dtapeT ? dtapeT + bi * nd : NULL, dxw + bi * T * d, dwseq + bi * T * d,
                 dh0 + bi * d, dtape0 + bi * nd);
  eng_kcpu_seq_outer(B, T, d, dxw, hs, h0, 1, dWh);
  eng_kcpu_seq_outer(B, T, d, dwseq, hs, NULL, 0, dWw);
  for (int64_t i = 0; i < d; i++) {
    double acc = 0;
    for (int64_t n = 0; n < B * T; n++) acc += dxw[n * d + i];
    db[i] = acc;
  }
  free(dwseq);
}
