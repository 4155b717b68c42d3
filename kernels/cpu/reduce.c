/* Reductions over the middle dim of [outer, n, inner], streamed through block_io's buffers:
 * floating data folds in double, integer data in int64. */
#include "cpu/reduce.h"

#include <math.h>
#include <omp.h>

#include "cpu/block_io.h"
#include "cpu/nd_iter.h"

#define BLOCK ENG_KCPU_BLOCK

typedef enum { FOLD_SUM, FOLD_SQDEV, FOLD_MAX, FOLD_MIN } fold_t;

static int is_int(eng_dtype_t dt) { return dt == ENG_I32 || dt == ENG_I64 || dt == ENG_U8; }

/* NaN-propagating max/min: once acc is NaN no comparison replaces it. */
static inline double fmax_nan(double acc, double v) { return (v != v || v > acc) ? v : acc; }
static inline double fmin_nan(double acc, double v) { return (v != v || v < acc) ? v : acc; }

static double fold_init(fold_t mode) {
  return mode == FOLD_MAX ? -INFINITY : mode == FOLD_MIN ? INFINITY : 0.0;
}

static double combine_f(fold_t mode, double a, double b) {
  switch (mode) {
  case FOLD_MAX: return fmax_nan(a, b);
  case FOLD_MIN: return fmin_nan(a, b);
  default: return a + b;
  }
}

/* Folds the m floating elements x[start ..] (stride 1) in double. */
static double fold_row_f(fold_t mode, const void *x, eng_dtype_t dt, int64_t start, int64_t m,
                         double mean) {
  double buf[BLOCK], acc = fold_init(mode);
  for (int64_t k0 = 0; k0 < m; k0 += BLOCK) {
    int64_t b = m - k0 < BLOCK ? m - k0 : BLOCK;
    eng_kcpu_load_f64(buf, x, dt, start + k0, 1, b);
    switch (mode) {
    case FOLD_SUM:
      for (int64_t k = 0; k < b; k++) acc += buf[k];
      break;
    case FOLD_SQDEV:
      for (int64_t k = 0; k < b; k++) acc += (buf[k] - mean) * (buf[k] - mean);
      break;
    case FOLD_MAX:
      for (int64_t k = 0; k < b; k++) acc = fmax_nan(acc, buf[k]);
      break;
    case FOLD_MIN:
      for (int64_t k = 0; k < b; k++) acc = fmin_nan(acc, buf[k]);
      break;
    }
  }
  return acc;
}

/* fold_row_f of a long row split across the threads; partials combine in thread order, so a run
 * with the same thread count gives the same bits. */
static double fold_row_par(fold_t mode, const void *x, eng_dtype_t dt, int64_t start, int64_t m,
                           double mean) {
  int maxt = omp_get_max_threads();
  if (m < ENG_KCPU_PARALLEL_MIN || maxt == 1) return fold_row_f(mode, x, dt, start, m, mean);
  double part[maxt];
  int used = 1;
#pragma omp parallel
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t a = m * t / nt, b = m * (t + 1) / nt;
    part[t] = fold_row_f(mode, x, dt, start + a, b - a, mean);
    if (t == 0) used = (int)nt;
  }
  double acc = part[0];
  for (int t = 1; t < used; t++) acc = combine_f(mode, acc, part[t]);
  return acc;
}

/* The finished value of op for one row (floating data). */
static double reduce_row_f(eng_reduce_op_t op, const void *x, eng_dtype_t dt, int64_t start,
                           int64_t n, double correction) {
  switch (op) {
  case ENG_REDUCE_MAX: return fold_row_par(FOLD_MAX, x, dt, start, n, 0);
  case ENG_REDUCE_MIN: return fold_row_par(FOLD_MIN, x, dt, start, n, 0);
  case ENG_REDUCE_SUM: return fold_row_par(FOLD_SUM, x, dt, start, n, 0);
  default: break;
  }
  double mean = fold_row_par(FOLD_SUM, x, dt, start, n, 0) / (double)n;
  if (op == ENG_REDUCE_MEAN) return mean;
  double dof = (double)n - correction;
  double var = fold_row_par(FOLD_SQDEV, x, dt, start, n, mean) / (dof > 0 ? dof : 0);
  return op == ENG_REDUCE_STD ? sqrt(var) : var;
}

/* acc[k] (k < m) = fold over r < n of x[base + r*inner + k]: contiguous loads across the tile. */
static void fold_tile_f(fold_t mode, const void *x, eng_dtype_t dt, int64_t base, int64_t n,
                        int64_t inner, int64_t m, const double *mean, double *acc) {
  double buf[BLOCK];
  for (int64_t k = 0; k < m; k++) acc[k] = fold_init(mode);
  for (int64_t r = 0; r < n; r++) {
    eng_kcpu_load_f64(buf, x, dt, base + r * inner, 1, m);
    switch (mode) {
    case FOLD_SUM:
      for (int64_t k = 0; k < m; k++) acc[k] += buf[k];
      break;
    case FOLD_SQDEV:
      for (int64_t k = 0; k < m; k++) acc[k] += (buf[k] - mean[k]) * (buf[k] - mean[k]);
      break;
    case FOLD_MAX:
      for (int64_t k = 0; k < m; k++) acc[k] = fmax_nan(acc[k], buf[k]);
      break;
    case FOLD_MIN:
      for (int64_t k = 0; k < m; k++) acc[k] = fmin_nan(acc[k], buf[k]);
      break;
    }
  }
}

/* The finished values of op for a tile of m columns (floating data). */
static void reduce_tile_f(eng_reduce_op_t op, const void *x, eng_dtype_t dt, int64_t base,
                          int64_t n, int64_t inner, int64_t m, double correction, double *out) {
  double mean[BLOCK];
  switch (op) {
  case ENG_REDUCE_MAX: fold_tile_f(FOLD_MAX, x, dt, base, n, inner, m, NULL, out); return;
  case ENG_REDUCE_MIN: fold_tile_f(FOLD_MIN, x, dt, base, n, inner, m, NULL, out); return;
  case ENG_REDUCE_SUM: fold_tile_f(FOLD_SUM, x, dt, base, n, inner, m, NULL, out); return;
  default: break;
  }
  fold_tile_f(FOLD_SUM, x, dt, base, n, inner, m, NULL, mean);
  for (int64_t k = 0; k < m; k++) mean[k] /= (double)n;
  if (op == ENG_REDUCE_MEAN) {
    for (int64_t k = 0; k < m; k++) out[k] = mean[k];
    return;
  }
  double dof = (double)n - correction;
  fold_tile_f(FOLD_SQDEV, x, dt, base, n, inner, m, mean, out);
  for (int64_t k = 0; k < m; k++) {
    out[k] /= dof > 0 ? dof : 0;
    if (op == ENG_REDUCE_STD) out[k] = sqrt(out[k]);
  }
}

/* ---- integers: SUM (wrapping, into i64), MAX, MIN ---- */

static int64_t fold_step_i(eng_reduce_op_t op, int64_t acc, int64_t v) {
  switch (op) {
  case ENG_REDUCE_MAX: return v > acc ? v : acc;
  case ENG_REDUCE_MIN: return v < acc ? v : acc;
  default: return (int64_t)((uint64_t)acc + (uint64_t)v);
  }
}

static int64_t fold_init_i(eng_reduce_op_t op) {
  return op == ENG_REDUCE_MAX ? INT64_MIN : op == ENG_REDUCE_MIN ? INT64_MAX : 0;
}

/* acc[k] (k < m) = fold over r < n of x[base + r*inner + k]; a tile of one is a row. */
static void fold_tile_i(eng_reduce_op_t op, const void *x, eng_dtype_t dt, int64_t base, int64_t n,
                        int64_t inner, int64_t m, int64_t *acc) {
  int64_t buf[BLOCK];
  for (int64_t k = 0; k < m; k++) acc[k] = fold_init_i(op);
  if (m == 1) {
    for (int64_t r0 = 0; r0 < n; r0 += BLOCK) {
      int64_t b = n - r0 < BLOCK ? n - r0 : BLOCK;
      eng_kcpu_load_i64(buf, x, dt, base + r0 * inner, inner, b);
      for (int64_t k = 0; k < b; k++) acc[0] = fold_step_i(op, acc[0], buf[k]);
    }
    return;
  }
  for (int64_t r = 0; r < n; r++) {
    eng_kcpu_load_i64(buf, x, dt, base + r * inner, 1, m);
    for (int64_t k = 0; k < m; k++) acc[k] = fold_step_i(op, acc[k], buf[k]);
  }
}

/* Output tiles of up to BLOCK columns; a row (inner = 1) is a tile of one. */
void eng_kcpu_reduce(eng_reduce_op_t op, eng_dtype_t dt, const void *x, void *y, int64_t outer,
                     int64_t n, int64_t inner, double correction) {
  const int64_t ntiles = (inner + BLOCK - 1) / BLOCK, units = outer * ntiles;
  const int big = outer * n * inner >= ENG_KCPU_PARALLEL_MIN;
  /* Few long rows: the threads share each row instead of splitting the rows. */
  const int split_rows = inner == 1 && outer < omp_get_max_threads();
#pragma omp parallel for schedule(static) if (big && !split_rows)
  for (int64_t u = 0; u < units; u++) {
    int64_t o = u / ntiles, i0 = (u % ntiles) * BLOCK;
    int64_t m = inner - i0 < BLOCK ? inner - i0 : BLOCK;
    int64_t base = o * n * inner + i0, yo = o * inner + i0;
    if (is_int(dt)) {
      int64_t acc[BLOCK];
      fold_tile_i(op, x, dt, base, n, inner, m, acc);
      if (op == ENG_REDUCE_SUM)
        for (int64_t k = 0; k < m; k++) ((int64_t *)y)[yo + k] = acc[k];
      else
        eng_kcpu_store_i64(y, dt, yo, acc, m);
    } else {
      double out[BLOCK];
      if (inner == 1)
        out[0] = reduce_row_f(op, x, dt, base, n, correction);
      else
        reduce_tile_f(op, x, dt, base, n, inner, m, correction, out);
      eng_kcpu_store_f64(y, dt, yo, 1, out, m);
    }
  }
}

/* ---- argmax ---- */

static int64_t argmax_f(const void *x, eng_dtype_t dt, int64_t base, int64_t stride, int64_t n) {
  double buf[BLOCK], best = 0;
  int64_t at = 0;
  for (int64_t r0 = 0; r0 < n; r0 += BLOCK) {
    int64_t b = n - r0 < BLOCK ? n - r0 : BLOCK;
    eng_kcpu_load_f64(buf, x, dt, base + r0 * stride, stride, b);
    for (int64_t k = 0; k < b; k++) {
      double v = buf[k];
      if (v != v) return r0 + k;
      if (r0 + k == 0 || v > best) {
        best = v;
        at = r0 + k;
      }
    }
  }
  return at;
}

static int64_t argmax_i(const void *x, eng_dtype_t dt, int64_t base, int64_t stride, int64_t n) {
  int64_t buf[BLOCK], best = INT64_MIN, at = 0;
  for (int64_t r0 = 0; r0 < n; r0 += BLOCK) {
    int64_t b = n - r0 < BLOCK ? n - r0 : BLOCK;
    eng_kcpu_load_i64(buf, x, dt, base + r0 * stride, stride, b);
    for (int64_t k = 0; k < b; k++) {
      if (r0 + k == 0 || buf[k] > best) {
        best = buf[k];
        at = r0 + k;
      }
    }
  }
  return at;
}

void eng_kcpu_argmax(eng_dtype_t dt, const void *x, int64_t *y, int64_t outer, int64_t n,
                     int64_t inner) {
  const int64_t cols = outer * inner;
#pragma omp parallel for schedule(static) if (cols * n >= ENG_KCPU_PARALLEL_MIN)
  for (int64_t c = 0; c < cols; c++) {
    int64_t base = (c / inner) * n * inner + c % inner;
    y[c] = is_int(dt) ? argmax_i(x, dt, base, inner, n) : argmax_f(x, dt, base, inner, n);
  }
}
