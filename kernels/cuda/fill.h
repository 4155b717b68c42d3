/* Fills a strided tensor on the device with one value. */
#ifndef ENG_KCUDA_FILL_H
#define ENG_KCUDA_FILL_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the element at `value` (host memory, already in dt's encoding: the caller converts as
 * eng_store_f64 does) to every idx of `shape`. Strides in elements, never negative (a stride-0 dim
 * just writes its element again). Returns a cudaError_t (0 = success). */
int eng_kcuda_fill(void *dst, eng_dtype_t dt, const int64_t *stride, const int64_t *shape, int ndim,
                   const void *value, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
