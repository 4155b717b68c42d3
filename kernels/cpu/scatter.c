/* Scatter-adds with a serial loop along the scattered dim and threads over the other positions:
 * no two threads touch one accumulator element, so there are no atomics and the order of the
 * additions is fixed. The offsets of the other positions are computed once. */
#include "cpu/scatter.h"

#include <omp.h>
#include <stdlib.h>

#include "cpu/convert.h"

/* Below this many additions a thread team costs more than it saves. */
#define PARALLEL_MIN 32768

/* The accumulator, source and index offsets of each position off `dim` (row-major over the
 * other dims). */
typedef struct {
  int64_t *acc, *src, *idx;
} offsets_t;

static int make_offsets(offsets_t *o, int64_t npos, int ndim, const int64_t *shape, int dim,
                        const int64_t *acc_stride, const int64_t *src_stride,
                        const int64_t *idx_stride) {
  size_t bytes = sizeof(int64_t) * (size_t)(npos ? npos : 1);
  o->acc = malloc(bytes);
  o->src = malloc(bytes);
  o->idx = malloc(bytes);
  if (!o->acc || !o->src || !o->idx) return -1;
  for (int64_t p = 0; p < npos; p++) {
    int64_t r = p, a = 0, s = 0, x = 0;
    for (int d = ndim - 1; d >= 0; d--) {
      if (d == dim) continue;
      int64_t c = r % shape[d];
      r /= shape[d];
      a += c * acc_stride[d];
      s += c * src_stride[d];
      x += c * idx_stride[d];
    }
    o->acc[p] = a;
    o->src[p] = s;
    o->idx[p] = x;
  }
  return 0;
}

static void free_offsets(offsets_t *o) {
  free(o->acc);
  free(o->src);
  free(o->idx);
}

/* Thread t of nt takes positions [lo, hi) and walks all of dim for them. */
#define SCATTER_LOOP(A, S, LOAD)                                                       \
  do {                                                                                 \
    A *acc_ = (A *)acc;                                                                \
    const S *src_ = (const S *)src;                                                    \
    _Pragma("omp parallel if (npos * len >= PARALLEL_MIN)") {                          \
      int nt = omp_get_num_threads(), t = omp_get_thread_num();                        \
      int64_t lo = npos * t / nt, hi = npos * (t + 1) / nt;                            \
      for (int64_t k = 0; k < len; k++)                                                \
        for (int64_t p = lo; p < hi; p++) {                                            \
          int64_t v = idx[o.idx[p] + k * is];                                          \
          acc_[o.acc[p] + v * pick_stride] += (A)LOAD(src_[o.src[p] + k * ss]);        \
        }                                                                              \
    }                                                                                  \
  } while (0)

#define AS_IS(x) (x)

int eng_kcpu_scatter_add(void *acc, eng_dtype_t acc_dt, const int64_t *acc_stride,
                         int64_t pick_stride, const void *src, eng_dtype_t src_dt,
                         const int64_t *src_stride, const int64_t *idx, const int64_t *idx_stride,
                         int ndim, const int64_t *shape, int dim) {
  int64_t len = shape[dim], npos = 1;
  for (int d = 0; d < ndim; d++)
    if (d != dim) npos *= shape[d];
  if (len == 0 || npos == 0) return 0;
  offsets_t o = {0};
  if (make_offsets(&o, npos, ndim, shape, dim, acc_stride, src_stride, idx_stride)) {
    free_offsets(&o);
    return -2;
  }
  int64_t is = idx_stride[dim], ss = src_stride[dim];
  int rc = 0;
  if (acc_dt == ENG_F32 && src_dt == ENG_F32) SCATTER_LOOP(float, float, AS_IS);
  else if (acc_dt == ENG_F32 && src_dt == ENG_BF16) SCATTER_LOOP(float, uint16_t, eng_k_bf16_to_f32);
  else if (acc_dt == ENG_F32 && src_dt == ENG_F16) SCATTER_LOOP(float, uint16_t, eng_k_f16_to_f32);
  else if (acc_dt == ENG_F64 && src_dt == ENG_F64) SCATTER_LOOP(double, double, AS_IS);
  else if (acc_dt == ENG_I32 && src_dt == ENG_I32) SCATTER_LOOP(int32_t, int32_t, AS_IS);
  else if (acc_dt == ENG_I64 && src_dt == ENG_I64) SCATTER_LOOP(int64_t, int64_t, AS_IS);
  else rc = -1;
  free_offsets(&o);
  return rc;
}
