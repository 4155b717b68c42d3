/* Strided N-d copy on one device, with dtype conversion by the rules of kernels/cpu/copy.c (the
 * same bits for every input), and broadcasting of src into dst through stride-0 dims. */
#ifndef ENG_KCUDA_COPY_H
#define ENG_KCUDA_COPY_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[idx] = convert(src[idx]) for every idx of `shape` (ndim dims, 0..ENG_MAX_DIMS). Strides in
 * elements, never negative; src strides may be 0. The two must not overlap. Dense same-dtype
 * copies are a cudaMemcpyAsync; dense conversions use 16-byte loads when the pointers allow.
 * Returns a cudaError_t (0 = success). */
int eng_kcuda_copy(void *dst, eng_dtype_t dst_dt, const int64_t *dst_stride, const void *src,
                   eng_dtype_t src_dt, const int64_t *src_stride, const int64_t *shape, int ndim,
                   cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
