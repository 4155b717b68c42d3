/* Cross-entropy: per row a max pass and a sum-of-exponentials pass in double; rows split over
 * the threads, partials added in thread order so that a run is reproducible. */
#include "cpu/loss.h"

#include <math.h>
#include <omp.h>

#include "cpu/block_io.h"
#include "cpu/nd_iter.h"

#define BLOCK ENG_KCPU_BLOCK

/* e^v in float for every dtype but f64 (f16/bf16 logits are computed as f32); sums in double. */
static inline double exp_in(eng_dtype_t dt, double v) {
  return dt == ENG_F64 ? exp(v) : (double)expf((float)v);
}

/* logsumexp(x[start .. start+c)) - x[start + t] */
static double row_loss(eng_dtype_t dt, const void *x, int64_t start, int64_t c, int64_t t) {
  double buf[BLOCK], mx = -INFINITY, sum = 0, picked;
  for (int64_t k0 = 0; k0 < c; k0 += BLOCK) {
    int64_t m = c - k0 < BLOCK ? c - k0 : BLOCK;
    eng_kcpu_load_f64(buf, x, dt, start + k0, 1, m);
    for (int64_t k = 0; k < m; k++) mx = (buf[k] != buf[k] || buf[k] > mx) ? buf[k] : mx;
  }
  for (int64_t k0 = 0; k0 < c; k0 += BLOCK) {
    int64_t m = c - k0 < BLOCK ? c - k0 : BLOCK;
    eng_kcpu_load_f64(buf, x, dt, start + k0, 1, m);
    for (int64_t k = 0; k < m; k++) sum += exp_in(dt, buf[k] - mx);
  }
  eng_kcpu_load_f64(&picked, x, dt, start + t, 1, 1);
  return mx + log(sum) - picked;
}

static double sum_rows(eng_dtype_t dt, const void *x, const int64_t *target, int64_t r0, int64_t r1,
                       int64_t c, int64_t ignore_index, int64_t *count) {
  double acc = 0;
  for (int64_t r = r0; r < r1; r++) {
    if (target[r] == ignore_index) continue;
    acc += row_loss(dt, x, r * c, c, target[r]);
    (*count)++;
  }
  return acc;
}

double eng_kcpu_cross_entropy_sum(eng_dtype_t dt, const void *x, const int64_t *target,
                                  int64_t rows, int64_t c, int64_t ignore_index, int64_t *count) {
  int maxt = omp_get_max_threads();
  *count = 0;
  if (rows * c < ENG_KCPU_PARALLEL_MIN || maxt == 1)
    return sum_rows(dt, x, target, 0, rows, c, ignore_index, count);
  double part[maxt];
  int64_t cnt[maxt];
  int used = 1;
#pragma omp parallel
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    cnt[t] = 0;
    part[t] = sum_rows(dt, x, target, rows * t / nt, rows * (t + 1) / nt, c, ignore_index, &cnt[t]);
    if (t == 0) used = (int)nt;
  }
  double acc = 0;
  for (int t = 0; t < used; t++) {
    acc += part[t];
    *count += cnt[t];
  }
  return acc;
}
