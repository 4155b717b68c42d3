/* Creation fills on the device (arange/linspace, eye), computing each element exactly as
 * kernels/cpu/create.c does, so that results are bit-identical. dst is contiguous. */
#ifndef ENG_KCUDA_CREATE_H
#define ENG_KCUDA_CREATE_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = start + i * step; with `linspace`, the second half counts back from end
 * (end - (n-1-i) * step). Returns a cudaError_t (0 = success). */
int eng_kcuda_arange(void *dst, eng_dtype_t dt, int64_t n, double start, double step, double end,
                     int linspace, cudaStream_t stream);
/* rows x cols identity. */
int eng_kcuda_eye(void *dst, eng_dtype_t dt, int64_t rows, int64_t cols, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
