/* Softmax, layer norm and RMS norm: a few streaming passes over each row (or column, for a
 * softmax along a non-last dim), parallel over rows when the work is large. */
#include "cpu/norm.h"

#include <math.h>

#include "cpu/block_io.h"
#include "cpu/nd_iter.h"

#define BLOCK ENG_KCPU_BLOCK

/* e^v: in float for every dtype but f64, as the f32 math of the other backends does; the sums of
 * these stay in double. */
static inline double exp_in(eng_dtype_t dt, double v) {
  return dt == ENG_F64 ? exp(v) : (double)expf((float)v);
}

/* One softmax line: n elements from `base`, `stride` apart, in x and y alike. */
static void softmax_line(eng_dtype_t dt, int log_out, const void *x, void *y, int64_t base,
                         int64_t stride, int64_t n) {
  double buf[BLOCK], mx = -INFINITY, sum = 0;
  for (int64_t k0 = 0; k0 < n; k0 += BLOCK) {
    int64_t m = n - k0 < BLOCK ? n - k0 : BLOCK;
    eng_kcpu_load_f64(buf, x, dt, base + k0 * stride, stride, m);
    for (int64_t k = 0; k < m; k++) mx = (buf[k] != buf[k] || buf[k] > mx) ? buf[k] : mx;
  }
  for (int64_t k0 = 0; k0 < n; k0 += BLOCK) {
    int64_t m = n - k0 < BLOCK ? n - k0 : BLOCK;
    eng_kcpu_load_f64(buf, x, dt, base + k0 * stride, stride, m);
    for (int64_t k = 0; k < m; k++) sum += exp_in(dt, buf[k] - mx);
  }
  const double shift = mx + log(sum), inv = 1.0 / sum;
  for (int64_t k0 = 0; k0 < n; k0 += BLOCK) {
    int64_t m = n - k0 < BLOCK ? n - k0 : BLOCK;
    eng_kcpu_load_f64(buf, x, dt, base + k0 * stride, stride, m);
    if (log_out)
      for (int64_t k = 0; k < m; k++) buf[k] -= shift;
    else
      for (int64_t k = 0; k < m; k++) buf[k] = exp_in(dt, buf[k] - mx) * inv;
    eng_kcpu_store_f64(y, dt, base + k0 * stride, stride, buf, m);
  }
}

/* The common case, f32 rows: each exponential is computed once and kept in y, then scaled (float
 * math like the GPU kernels; the denominator in double). */
static void softmax_row_f32(int log_out, const float *x, float *y, int64_t n) {
  float mx = -INFINITY;
  double sum = 0;
  for (int64_t k = 0; k < n; k++) mx = (x[k] != x[k] || x[k] > mx) ? x[k] : mx;
  if (log_out) {
    for (int64_t k = 0; k < n; k++) sum += expf(x[k] - mx);
    const double shift = mx + log(sum);
    for (int64_t k = 0; k < n; k++) y[k] = (float)(x[k] - shift);
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    y[k] = expf(x[k] - mx);
    sum += y[k];
  }
  const float inv = (float)(1.0 / sum);
  for (int64_t k = 0; k < n; k++) y[k] *= inv;
}

void eng_kcpu_softmax(eng_dtype_t dt, int log_out, const void *x, void *y, int64_t outer, int64_t n,
                      int64_t inner) {
  const int64_t lines = outer * inner;
#pragma omp parallel for schedule(static) if (lines * n >= ENG_KCPU_PARALLEL_MIN)
  for (int64_t l = 0; l < lines; l++) {
    if (dt == ENG_F32 && inner == 1)
      softmax_row_f32(log_out, (const float *)x + l * n, (float *)y + l * n, n);
    else
      softmax_line(dt, log_out, x, y, (l / inner) * n * inner + l % inner, inner, n);
  }
}

/* The sum over m elements x[start ..] of x, or of (x - center)^2 when `squared`. */
static double row_sum(eng_dtype_t dt, const void *x, int64_t start, int64_t m, int squared,
                      double center) {
  double buf[BLOCK], acc = 0;
  for (int64_t k0 = 0; k0 < m; k0 += BLOCK) {
    int64_t b = m - k0 < BLOCK ? m - k0 : BLOCK;
    eng_kcpu_load_f64(buf, x, dt, start + k0, 1, b);
    if (squared)
      for (int64_t k = 0; k < b; k++) acc += (buf[k] - center) * (buf[k] - center);
    else
      for (int64_t k = 0; k < b; k++) acc += buf[k];
  }
  return acc;
}

/* y[row] = (x[row] - shift) * scale * w + b, w and b optional. */
static void affine_row(eng_dtype_t dt, const void *x, const void *w, const void *b, void *y,
                       int64_t start, int64_t d, double shift, double scale) {
  double buf[BLOCK], wb[BLOCK], bb[BLOCK];
  for (int64_t k0 = 0; k0 < d; k0 += BLOCK) {
    int64_t m = d - k0 < BLOCK ? d - k0 : BLOCK;
    eng_kcpu_load_f64(buf, x, dt, start + k0, 1, m);
    for (int64_t k = 0; k < m; k++) buf[k] = (buf[k] - shift) * scale;
    if (w) {
      eng_kcpu_load_f64(wb, w, dt, k0, 1, m);
      for (int64_t k = 0; k < m; k++) buf[k] *= wb[k];
    }
    if (b) {
      eng_kcpu_load_f64(bb, b, dt, k0, 1, m);
      for (int64_t k = 0; k < m; k++) buf[k] += bb[k];
    }
    eng_kcpu_store_f64(y, dt, start + k0, 1, buf, m);
  }
}

void eng_kcpu_layer_norm(eng_dtype_t dt, const void *x, const void *w, const void *b, void *y,
                         int64_t rows, int64_t d, double eps) {
#pragma omp parallel for schedule(static) if (rows * d >= ENG_KCPU_PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++) {
    double mean = row_sum(dt, x, r * d, d, 0, 0.0) / (double)d;
    double var = row_sum(dt, x, r * d, d, 1, mean) / (double)d;
    affine_row(dt, x, w, b, y, r * d, d, mean, 1.0 / sqrt(var + eps));
  }
}

void eng_kcpu_rms_norm(eng_dtype_t dt, const void *x, const void *w, void *y, int64_t rows,
                       int64_t d, double eps) {
#pragma omp parallel for schedule(static) if (rows * d >= ENG_KCPU_PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++) {
    double ms = row_sum(dt, x, r * d, d, 1, 0.0) / (double)d;
    affine_row(dt, x, w, NULL, y, r * d, d, 0.0, 1.0 / sqrt(ms + eps));
  }
}
