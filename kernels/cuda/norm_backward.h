/* CUDA backward kernels of softmax, layer norm, RMS norm and cross-entropy, and the fused residual
 * add + RMS norm: the functions of kernels/cpu/norm_backward.h on contiguous device data, with
 * f32 arithmetic (f64 for f64 operands) and bf16/f16 kept in memory. One block per row. Parameter
 * gradients are summed without atomics: each block sums its rows into its own f32 row of a
 * workspace, and a second kernel adds those rows in a fixed order, so results are reproducible.
 * Launchers return a cudaError_t as int (0 = success) and never synchronize. */
#ifndef ENG_KCUDA_NORM_BACKWARD_H
#define ENG_KCUDA_NORM_BACKWARD_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A device operand and its dtype (p NULL: absent). */
typedef struct {
  const void *p;
  eng_dtype_t dt;
} eng_kcuda_arg_t;

/* gx from gy and y (softmax's output) along the middle dim of [outer, n, inner], dtype dt:
 * softmax: y * (gy - sum(gy * y)); log_softmax (log_out): gy - exp(y) * sum(gy). */
int eng_kcuda_softmax_backward(eng_dtype_t dt, int log_out, const void *gy, const void *y, void *gx,
                               int64_t outer, int64_t n, int64_t inner, cudaStream_t stream);

/* Whether the launchers below take this (gy, x) dtype pair directly: the same dtype, or any gy
 * against an f32 x. Callers convert gy to x's dtype otherwise. */
int eng_kcuda_norm_backward_pair(eng_dtype_t gy_dt, eng_dtype_t x_dt);

/* Bytes of device workspace the norm backwards need for rows x d (layer: gw and gb). */
size_t eng_kcuda_norm_backward_workspace(eng_dtype_t x_dt, int64_t rows, int64_t d, int layer);

/* Backward of rms_norm (layer == 0) or layer_norm (layer) over rows of x [rows, d]: gx in x's
 * dtype; gw [d] (gw_dt; needs w) and, for layer norm, gb [d] (gb_dt) when not NULL. w.p may be
 * NULL (w = 1). */
int eng_kcuda_norm_backward(int layer, eng_kcuda_arg_t gy, eng_kcuda_arg_t x, eng_kcuda_arg_t w,
                            double eps, void *gx, void *gw, eng_dtype_t gw_dt, void *gb,
                            eng_dtype_t gb_dt, int64_t rows, int64_t d, void *workspace,
                            cudaStream_t stream);

/* Bytes of device workspace eng_kcuda_cross_entropy_backward needs. */
size_t eng_kcuda_cross_entropy_backward_workspace(void);

/* glogits [rows, c] (logits' dtype dt) = (softmax(x[r]) - onehot(target[r])) * gloss / n_valid,
 * 0 for rows whose target is ignore_index; n_valid is counted on the device and gloss (one element
 * of gloss_dt) read there. A target that is neither ignored nor in [0, c) makes its row NaN. */
int eng_kcuda_cross_entropy_backward(eng_dtype_t dt, const void *x, eng_dtype_t target_dt,
                                     const void *target, eng_kcuda_arg_t gloss, void *glogits,
                                     int64_t rows, int64_t c, int64_t ignore_index,
                                     void *workspace, cudaStream_t stream);

/* residual_out (h_dt: f32, or f64) = x + residual (residual.p may be NULL; its dtype is x's, f32
 * or f64), then y (x's dtype) = residual_out / sqrt(mean(residual_out^2) + eps) * w, w.p may be
 * NULL; one block per row of [rows, d]. */
int eng_kcuda_add_rms_norm(eng_kcuda_arg_t x, eng_kcuda_arg_t residual, eng_kcuda_arg_t w,
                           double eps, void *y, void *residual_out, eng_dtype_t h_dt, int64_t rows,
                           int64_t d, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
