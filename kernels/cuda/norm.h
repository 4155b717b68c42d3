/* CUDA softmax, layer norm and RMS norm, computing the functions of kernels/cpu/norm.h on
 * contiguous data of a floating dtype: statistics in f32 (f64 for f64) and every output rounded
 * once. Rows that fit are read once into registers; longer rows are streamed in a few passes.
 * Launchers return a cudaError_t as int (0 = success) and never synchronize. */
#ifndef ENG_KCUDA_NORM_H
#define ENG_KCUDA_NORM_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Softmax (log-softmax when `log_out`) of x [outer, n, inner] along the middle dim into y of the
 * same layout and dtype; the max is subtracted first, and a NaN anywhere in a line makes the line
 * NaN. */
int eng_kcuda_softmax(eng_dtype_t dt, int log_out, const void *x, void *y, int64_t outer, int64_t n,
                      int64_t inner, cudaStream_t stream);

/* y = (x - mean) / sqrt(var + eps) * w + b per row of x [rows, d], with the biased variance
 * (two-pass); w and b are [d] of x's dtype and may be NULL. */
int eng_kcuda_layer_norm(eng_dtype_t dt, const void *x, const void *w, const void *b, void *y,
                         int64_t rows, int64_t d, double eps, cudaStream_t stream);

/* y = x / sqrt(mean(x^2) + eps) * w per row of x [rows, d]; w is [d] or NULL. */
int eng_kcuda_rms_norm(eng_dtype_t dt, const void *x, const void *w, void *y, int64_t rows,
                       int64_t d, double eps, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
