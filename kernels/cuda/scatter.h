/* GPU scatter-adds for the gradients of indexing (index_add, scatter_add): the contract of
 * eng_kcpu_scatter_add (kernels/cpu/scatter.h), with atomic additions. */
#ifndef ENG_KCUDA_SCATTER_H
#define ENG_KCUDA_SCATTER_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* As eng_kcpu_scatter_add, with idx a contiguous-or-strided i64 device tensor and every pointer
 * on the device. Each position adds with one atomicAdd, so float sums are not deterministic:
 * their order varies from run to run (integer sums are exact). An index outside [0, limit) is
 * skipped (nothing is read or written for it): the adapter checks the indices before, except
 * during graph capture. Returns a cudaError_t (cudaErrorInvalidValue for a dtype pair it does
 * not take). */
int eng_kcuda_scatter_add(void *acc, eng_dtype_t acc_dt, const int64_t *acc_stride,
                          int64_t pick_stride, const void *src, eng_dtype_t src_dt,
                          const int64_t *src_stride, const int64_t *idx, const int64_t *idx_stride,
                          int ndim, const int64_t *shape, int dim, int64_t limit,
                          cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
