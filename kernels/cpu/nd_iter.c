/* The strided N-d walk behind the elementwise kernels: simplify the layout, then hand each
 * thread a contiguous range of the flat element index, visited as runs along the inner dim. */
#include "cpu/nd_iter.h"

#include <omp.h>
#include <string.h>

void eng_kcpu_nd_init(eng_kcpu_nd_t *it, int ndim, const int64_t *size, int nops) {
  memset(it, 0, sizeof *it);
  it->ndim = ndim;
  it->nops = nops;
  memcpy(it->size, size, sizeof(int64_t) * (size_t)ndim);
}

void eng_kcpu_nd_operand(eng_kcpu_nd_t *it, int k, void *base, size_t elsize,
                         const int64_t *stride) {
  it->base[k] = base;
  it->elsize[k] = elsize;
  memcpy(it->stride[k], stride, sizeof(int64_t) * (size_t)it->ndim);
}

/* Drops size-1 dims, then merges each dim into the one outside it when every operand steps
 * through both as one (outer stride = inner stride * inner size). Leaves at least one dim. */
static void simplify(eng_kcpu_nd_t *it) {
  int m = 0;
  for (int d = 0; d < it->ndim; d++) {
    if (it->size[d] == 1) continue;
    int merge = m > 0;
    for (int k = 0; k < it->nops && merge; k++)
      merge = it->stride[k][m - 1] == it->stride[k][d] * it->size[d];
    if (merge) {
      it->size[m - 1] *= it->size[d];
      for (int k = 0; k < it->nops; k++) it->stride[k][m - 1] = it->stride[k][d];
    } else {
      it->size[m] = it->size[d];
      for (int k = 0; k < it->nops; k++) it->stride[k][m] = it->stride[k][d];
      m++;
    }
  }
  if (m == 0) {
    it->size[0] = 1;
    for (int k = 0; k < it->nops; k++) it->stride[k][0] = 0;
    m = 1;
  }
  it->ndim = m;
}

/* Visits flat elements [e0, e1) of the simplified layout. */
static void run_range(const eng_kcpu_nd_t *it, int64_t e0, int64_t e1, eng_kcpu_run_fn fn,
                      void *ctx) {
  const int last = it->ndim - 1, nops = it->nops;
  const int64_t inner = it->size[last];
  int64_t idx[ENG_MAX_DIMS], row_off[ENG_KCPU_ND_MAX_OPS] = {0}, s[ENG_KCPU_ND_MAX_OPS];
  int64_t row = e0 / inner, col = e0 % inner;
  for (int d = last - 1; d >= 0; d--) {
    idx[d] = row % it->size[d];
    row /= it->size[d];
  }
  for (int k = 0; k < nops; k++) {
    s[k] = it->stride[k][last];
    for (int d = 0; d < last; d++) row_off[k] += idx[d] * it->stride[k][d];
  }
  while (e0 < e1) {
    int64_t n = inner - col < e1 - e0 ? inner - col : e1 - e0;
    char *p[ENG_KCPU_ND_MAX_OPS];
    for (int k = 0; k < nops; k++)
      p[k] = it->base[k] + (row_off[k] + col * s[k]) * (int64_t)it->elsize[k];
    fn(ctx, n, p, s);
    e0 += n;
    col = 0;
    /* next row: odometer over the outer dims */
    for (int d = last - 1; d >= 0; d--) {
      for (int k = 0; k < nops; k++) row_off[k] += it->stride[k][d];
      if (++idx[d] < it->size[d]) break;
      for (int k = 0; k < nops; k++) row_off[k] -= it->size[d] * it->stride[k][d];
      idx[d] = 0;
    }
  }
}

void eng_kcpu_nd_run(const eng_kcpu_nd_t *in, eng_kcpu_run_fn fn, void *ctx) {
  int64_t total = 1;
  for (int d = 0; d < in->ndim; d++) total *= in->size[d];
  if (total == 0) return;
  eng_kcpu_nd_t it = *in;
  simplify(&it);
  if (total < ENG_KCPU_PARALLEL_MIN || omp_get_max_threads() == 1) {
    run_range(&it, 0, total, fn, ctx);
    return;
  }
#pragma omp parallel
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    run_range(&it, total * t / nt, total * (t + 1) / nt, fn, ctx);
  }
}
