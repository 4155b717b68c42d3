/* E1 forward and backward: one independent chain per batch row (OpenMP over the batch), then the
 * weight gradient as a sum of outer products over every step. */
#include "cpu/e1.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

void eng_kcpu_e1_forward(int64_t B, int64_t T, int64_t d, const double *xw, const double *z,
                         const double *W, const double *b, const double *h0, double *y, double *hT,
                         double *hs) {
#pragma omp parallel for schedule(static) if (B > 1 && B * T * d * d > 100000)
  for (int64_t bi = 0; bi < B; bi++) {
    const double *hp = h0 ? h0 + bi * d : NULL;
    for (int64_t t = 0; t < T; t++) {
      const int64_t row = (bi * T + t) * d;
      double *h = hs + row;
      for (int64_t i = 0; i < d; i++) {
        double pre = xw[row + i] + b[i];
        if (hp)
          for (int64_t j = 0; j < d; j++) pre += W[i * d + j] * hp[j];
        h[i] = tanh(pre);
        const double zi = z[row + i];
        y[row + i] = h[i] * zi * sigmoid(zi);
      }
      hp = h;
    }
    for (int64_t i = 0; i < d; i++) hT[bi * d + i] = hp ? hp[i] : 0.0;
  }
}

void eng_kcpu_seq_outer(int64_t B, int64_t T, int64_t d, const double *g, const double *hs,
                        const double *h0, int shift, double *dW) {
#pragma omp parallel for schedule(static) if (d > 1 && B * T * d * d > 100000)
  for (int64_t i = 0; i < d; i++) {
    double *row = dW + i * d;
    memset(row, 0, sizeof(double) * (size_t)d);
    for (int64_t bi = 0; bi < B; bi++)
      for (int64_t t = 0; t < T; t++) {
        const double gi = g[(bi * T + t) * d + i];
        const double *x = !shift  ? hs + (bi * T + t) * d
                          : t > 0 ? hs + (bi * T + t - 1) * d
                          : h0    ? h0 + bi * d
                                  : NULL;
        if (!x) continue;
        for (int64_t j = 0; j < d; j++) row[j] += gi * x[j];
      }
  }
}

void eng_kcpu_e1_backward(int64_t B, int64_t T, int64_t d, const double *z, const double *W,
                          const double *h0, const double *hs, const double *dy, const double *dhT,
                          double *dxw, double *dz, double *dW, double *db, double *dh0) {
#pragma omp parallel for schedule(static) if (B > 1 && B * T * d * d > 100000)
  for (int64_t bi = 0; bi < B; bi++) {
    /* carry = the gradient reaching h_t from later steps (and from h_T) */
    double *carry = dh0 + bi * d;
    for (int64_t i = 0; i < d; i++) carry[i] = dhT ? dhT[bi * d + i] : 0.0;
    for (int64_t t = T - 1; t >= 0; t--) {
      const int64_t row = (bi * T + t) * d;
      const double *h = hs + row;
      double *dpre = dxw + row;
      for (int64_t i = 0; i < d; i++) {
        const double zi = z[row + i], s = sigmoid(zi), g = dy[row + i];
        const double dh = g * zi * s + carry[i];
        dpre[i] = dh * (1.0 - h[i] * h[i]);
        dz[row + i] = g * h[i] * s * (1.0 + zi * (1.0 - s));
      }
      for (int64_t j = 0; j < d; j++) {
        double acc = 0;
        for (int64_t i = 0; i < d; i++) acc += W[i * d + j] * dpre[i];
        carry[j] = acc;
      }
    }
  }
  eng_kcpu_seq_outer(B, T, d, dxw, hs, h0, 1, dW);
  for (int64_t i = 0; i < d; i++) {
    double acc = 0;
    for (int64_t n = 0; n < B * T; n++) acc += dxw[n * d + i];
    db[i] = acc;
  }
}
