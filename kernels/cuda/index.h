/* Gathers on the GPU for the indexing ops (embedding, index_select and gather are one kernel with
 * different strides, as on the CPU) and the bounds check that runs before them. Index tensors are
 * read in their own dtype (i32, i64 or u8) and layout; shapes and strides are in elements. */
#ifndef ENG_KCUDA_INDEX_H
#define ENG_KCUDA_INDEX_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the contiguous out of shape[0..ndim-1] (ndim 0..ENG_MAX_DIMS); at each position c,
 *   v = idx[sum_d c_d * idx_stride[d]],  out[c] = x[sum_d c_d * x_stride[d] + v * pick_stride]
 * when 0 <= v < limit, else NaN (float dtypes) or 0 (integer dtypes): the kernel never reads out
 * of bounds, even when nobody checked the indices (during graph capture). Returns a cudaError_t. */
int eng_kcuda_take(void *out, const void *x, eng_dtype_t dtype, int ndim, const int64_t *shape,
                   const int64_t *x_stride, const void *idx, eng_dtype_t idx_dtype,
                   const int64_t *idx_stride, int64_t pick_stride, int64_t limit,
                   cudaStream_t stream);

/* Sets *first (device memory) to the smallest row-major position in the idx tensor (shape, stride,
 * ndim dims) of a value outside [0, limit), or to UINT64_MAX when all are in range. Returns a
 * cudaError_t. */
int eng_kcuda_first_out_of_range(const void *idx, eng_dtype_t idx_dtype, int ndim,
                                 const int64_t *shape, const int64_t *stride, int64_t limit,
                                 unsigned long long *first, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
