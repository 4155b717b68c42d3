/* Backward row kernels and the fused add + RMS norm: per row, one pass for the statistics and one
 * that writes, parallel over rows; parameter gradients are summed afterwards column block by
 * column block, each column over the rows in order (deterministic, parallel over columns). */
#include "cpu/norm_backward.h"

#include <math.h>

#include "cpu/block_io.h"
#include "cpu/nd_iter.h"

#define BLOCK ENG_KCPU_BLOCK

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* m elements of an operand from `start` (all ones when a is absent). */
static void load_arg(double *dst, eng_kcpu_arg_t a, int64_t start, int64_t m) {
  if (a.p)
    eng_kcpu_load_f64(dst, a.p, a.dt, start, 1, m);
  else
    for (int64_t k = 0; k < m; k++) dst[k] = 1.0;
}

/* ---- softmax ---- */

static void softmax_backward_line(eng_dtype_t dt, int log_out, const void *gy, const void *y,
                                  void *gx, int64_t base, int64_t stride, int64_t n) {
  double g[BLOCK], v[BLOCK], s = 0;
  for (int64_t k0 = 0; k0 < n; k0 += BLOCK) {
    int64_t m = min64(n - k0, BLOCK);
    eng_kcpu_load_f64(g, gy, dt, base + k0 * stride, stride, m);
    eng_kcpu_load_f64(v, y, dt, base + k0 * stride, stride, m);
    for (int64_t k = 0; k < m; k++) s += log_out ? g[k] : g[k] * v[k];
  }
  for (int64_t k0 = 0; k0 < n; k0 += BLOCK) {
    int64_t m = min64(n - k0, BLOCK);
    eng_kcpu_load_f64(g, gy, dt, base + k0 * stride, stride, m);
    eng_kcpu_load_f64(v, y, dt, base + k0 * stride, stride, m);
    for (int64_t k = 0; k < m; k++) g[k] = log_out ? g[k] - exp(v[k]) * s : v[k] * (g[k] - s);
    eng_kcpu_store_f64(gx, dt, base + k0 * stride, stride, g, m);
  }
}

void eng_kcpu_softmax_backward(eng_dtype_t dt, int log_out, const void *gy, const void *y, void *gx,
                               int64_t outer, int64_t n, int64_t inner) {
  const int64_t lines = outer * inner;
#pragma omp parallel for schedule(static) if (lines * n >= ENG_KCPU_PARALLEL_MIN)
  for (int64_t l = 0; l < lines; l++)
    softmax_backward_line(dt, log_out, gy, y, gx, (l / inner) * n * inner + l % inner, inner, n);
}

/* ---- parameter gradients: out[k] = sum over rows of f(row, k) ---- */

/* Which sum a column pass computes. */
typedef enum { SUM_RMS_GW, SUM_LN_GW, SUM_LN_GB } col_sum_t;

static void column_sums(col_sum_t what, eng_kcpu_arg_t gy, eng_kcpu_arg_t x, const double *scratch,
                        void *out, eng_dtype_t out_dt, int64_t rows, int64_t d) {
  const int64_t nblocks = (d + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) if (rows * d >= ENG_KCPU_PARALLEL_MIN)
  for (int64_t b = 0; b < nblocks; b++) {
    const int64_t k0 = b * BLOCK, m = min64(d - k0, BLOCK);
    double acc[BLOCK] = {0}, g[BLOCK], v[BLOCK];
    for (int64_t r = 0; r < rows; r++) {
      eng_kcpu_load_f64(g, gy.p, gy.dt, r * d + k0, 1, m);
      if (what == SUM_LN_GB) {
        for (int64_t k = 0; k < m; k++) acc[k] += g[k];
        continue;
      }
      eng_kcpu_load_f64(v, x.p, x.dt, r * d + k0, 1, m);
      if (what == SUM_RMS_GW) {
        const double rstd = scratch[r];
        for (int64_t k = 0; k < m; k++) acc[k] += g[k] * v[k] * rstd;
      } else {
        const double mean = scratch[2 * r], rstd = scratch[2 * r + 1];
        for (int64_t k = 0; k < m; k++) acc[k] += g[k] * (v[k] - mean) * rstd;
      }
    }
    eng_kcpu_store_f64(out, out_dt, k0, 1, acc, m);
  }
}

/* ---- RMS norm ---- */

/* The row sums of x^2 and of gy * w * x. */
static void rms_row_sums(eng_kcpu_arg_t gy, eng_kcpu_arg_t x, eng_kcpu_arg_t w, int64_t start,
                         int64_t d, double *sq, double *dot) {
  double g[BLOCK], v[BLOCK], wb[BLOCK];
  *sq = 0;
  *dot = 0;
  for (int64_t k0 = 0; k0 < d; k0 += BLOCK) {
    int64_t m = min64(d - k0, BLOCK);
    eng_kcpu_load_f64(g, gy.p, gy.dt, start + k0, 1, m);
    eng_kcpu_load_f64(v, x.p, x.dt, start + k0, 1, m);
    load_arg(wb, w, k0, m);
    for (int64_t k = 0; k < m; k++) {
      *sq += v[k] * v[k];
      *dot += g[k] * wb[k] * v[k];
    }
  }
}

void eng_kcpu_rms_norm_backward(eng_kcpu_arg_t gy, eng_kcpu_arg_t x, eng_kcpu_arg_t w, double eps,
                                void *gx, void *gw, eng_dtype_t gw_dt, double *scratch,
                                int64_t rows, int64_t d) {
#pragma omp parallel for schedule(static) if (rows * d >= ENG_KCPU_PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++) {
    double sq, dot, g[BLOCK], v[BLOCK], wb[BLOCK];
    rms_row_sums(gy, x, w, r * d, d, &sq, &dot);
    const double rstd = 1.0 / sqrt(sq / (double)d + eps);
    /* d/dx of x * rstd: rstd * g - x * rstd^3 * mean(g * x), with g = gy * w */
    const double c = rstd * rstd * rstd * dot / (double)d;
    scratch[r] = rstd;
    for (int64_t k0 = 0; k0 < d; k0 += BLOCK) {
      int64_t m = min64(d - k0, BLOCK);
      eng_kcpu_load_f64(g, gy.p, gy.dt, r * d + k0, 1, m);
      eng_kcpu_load_f64(v, x.p, x.dt, r * d + k0, 1, m);
      load_arg(wb, w, k0, m);
      for (int64_t k = 0; k < m; k++) g[k] = rstd * g[k] * wb[k] - c * v[k];
      eng_kcpu_store_f64(gx, x.dt, r * d + k0, 1, g, m);
    }
  }
  if (gw) column_sums(SUM_RMS_GW, gy, x, scratch, gw, gw_dt, rows, d);
}

/* ---- layer norm ---- */

void eng_kcpu_layer_norm_backward(eng_kcpu_arg_t gy, eng_kcpu_arg_t x, eng_kcpu_arg_t w,
                                  double eps, void *gx, void *gw, eng_dtype_t gw_dt, void *gb,
                                  eng_dtype_t gb_dt, double *scratch, int64_t rows, int64_t d) {
#pragma omp parallel for schedule(static) if (rows * d >= ENG_KCPU_PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++) {
    double g[BLOCK], v[BLOCK], wb[BLOCK], mean = 0, var = 0, sg = 0, sgx = 0;
    for (int64_t k0 = 0; k0 < d; k0 += BLOCK) {
      int64_t m = min64(d - k0, BLOCK);
      eng_kcpu_load_f64(v, x.p, x.dt, r * d + k0, 1, m);
      for (int64_t k = 0; k < m; k++) mean += v[k];
    }
    mean /= (double)d;
    for (int64_t k0 = 0; k0 < d; k0 += BLOCK) {
      int64_t m = min64(d - k0, BLOCK);
      eng_kcpu_load_f64(v, x.p, x.dt, r * d + k0, 1, m);
      eng_kcpu_load_f64(g, gy.p, gy.dt, r * d + k0, 1, m);
      load_arg(wb, w, k0, m);
      for (int64_t k = 0; k < m; k++) {
        const double c = v[k] - mean, gw_k = g[k] * wb[k];
        var += c * c;
        sg += gw_k;
        sgx += gw_k * c;
      }
    }
    const double rstd = 1.0 / sqrt(var / (double)d + eps);
    /* gx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = gy * w, xhat = (x - mean) * rstd */
    const double mg = sg / (double)d, mgx = sgx * rstd / (double)d;
    scratch[2 * r] = mean;
    scratch[2 * r + 1] = rstd;
    for (int64_t k0 = 0; k0 < d; k0 += BLOCK) {
      int64_t m = min64(d - k0, BLOCK);
      eng_kcpu_load_f64(v, x.p, x.dt, r * d + k0, 1, m);
      eng_kcpu_load_f64(g, gy.p, gy.dt, r * d + k0, 1, m);
      load_arg(wb, w, k0, m);
      for (int64_t k = 0; k < m; k++)
        g[k] = rstd * (g[k] * wb[k] - mg - (v[k] - mean) * rstd * mgx);
      eng_kcpu_store_f64(gx, x.dt, r * d + k0, 1, g, m);
    }
  }
  if (gw) column_sums(SUM_LN_GW, gy, x, scratch, gw, gw_dt, rows, d);
  if (gb) column_sums(SUM_LN_GB, gy, x, scratch, gb, gb_dt, rows, d);
}

/* ---- cross-entropy ---- */

void eng_kcpu_cross_entropy_backward(eng_dtype_t dt, const void *x, const int64_t *target,
                                     double gloss, void *glogits, int64_t rows, int64_t c,
                                     int64_t ignore_index) {
  int64_t count = 0;
  for (int64_t r = 0; r < rows; r++) count += target[r] != ignore_index;
  const double scale = count ? gloss / (double)count : 0.0;
#pragma omp parallel for schedule(static) if (rows * c >= ENG_KCPU_PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++) {
    double v[BLOCK], mx = -INFINITY, s = 0;
    const int64_t t = target[r];
    if (t == ignore_index) {
      for (int64_t k = 0; k < BLOCK; k++) v[k] = 0;
      for (int64_t k0 = 0; k0 < c; k0 += BLOCK)
        eng_kcpu_store_f64(glogits, dt, r * c + k0, 1, v, min64(c - k0, BLOCK));
      continue;
    }
    for (int64_t k0 = 0; k0 < c; k0 += BLOCK) {
      int64_t m = min64(c - k0, BLOCK);
      eng_kcpu_load_f64(v, x, dt, r * c + k0, 1, m);
      for (int64_t k = 0; k < m; k++) mx = (v[k] != v[k] || v[k] > mx) ? v[k] : mx;
    }
    for (int64_t k0 = 0; k0 < c; k0 += BLOCK) {
      int64_t m = min64(c - k0, BLOCK);
      eng_kcpu_load_f64(v, x, dt, r * c + k0, 1, m);
      for (int64_t k = 0; k < m; k++) s += exp(v[k] - mx);
    }
    for (int64_t k0 = 0; k0 < c; k0 += BLOCK) {
      int64_t m = min64(c - k0, BLOCK);
      eng_kcpu_load_f64(v, x, dt, r * c + k0, 1, m);
      for (int64_t k = 0; k < m; k++)
        v[k] = (exp(v[k] - mx) / s - (k0 + k == t ? 1.0 : 0.0)) * scale;
      eng_kcpu_store_f64(glogits, dt, r * c + k0, 1, v, m);
    }
  }
}

/* ---- fused residual add + RMS norm ---- */

void eng_kcpu_add_rms_norm(eng_kcpu_arg_t x, eng_kcpu_arg_t residual, eng_kcpu_arg_t w, double eps,
                           void *y, void *residual_out, eng_dtype_t h_dt, int64_t rows, int64_t d) {
#pragma omp parallel for schedule(static) if (rows * d >= ENG_KCPU_PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++) {
    double h[BLOCK], v[BLOCK], sq = 0;
    for (int64_t k0 = 0; k0 < d; k0 += BLOCK) {
      int64_t m = min64(d - k0, BLOCK);
      eng_kcpu_load_f64(h, x.p, x.dt, r * d + k0, 1, m);
      if (residual.p) {
        eng_kcpu_load_f64(v, residual.p, residual.dt, r * d + k0, 1, m);
        for (int64_t k = 0; k < m; k++) h[k] += v[k];
      }
      eng_kcpu_store_f64(residual_out, h_dt, r * d + k0, 1, h, m);
      /* the statistics see h as stored (rounded), as the backward will */
      eng_kcpu_load_f64(h, residual_out, h_dt, r * d + k0, 1, m);
      for (int64_t k = 0; k < m; k++) sq += h[k] * h[k];
    }
    const double rstd = 1.0 / sqrt(sq / (double)d + eps);
    for (int64_t k0 = 0; k0 < d; k0 += BLOCK) {
      int64_t m = min64(d - k0, BLOCK);
      eng_kcpu_load_f64(h, residual_out, h_dt, r * d + k0, 1, m);
      load_arg(v, w, k0, m);
      for (int64_t k = 0; k < m; k++) h[k] = h[k] * rstd * v[k];
      eng_kcpu_store_f64(y, x.dt, r * d + k0, 1, h, m);
    }
  }
}
