/* The tail of a linear layer when cuBLASLt has no fused epilogue for it (f64, or a bias after an
 * empty product): y[r, c] = act(y[r, c] + bias[c]) in place, computed in f32 (f64 for f64). */
#ifndef ENG_KCUDA_BIAS_ACT_H
#define ENG_KCUDA_BIAS_ACT_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y contiguous [rows, cols] of a floating dtype; bias contiguous [cols] of the same dtype, or NULL;
 * act an eng_act_t (none, relu, gelu in its tanh approximation). Returns a cudaError_t. */
int eng_kcuda_bias_act(void *y, const void *bias, eng_dtype_t dtype, int64_t rows, int64_t cols,
                       int act, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
