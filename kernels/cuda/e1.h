/* CUDA E1 recurrence (the gated Elman cell of kernels/cpu/e1.h): persistent kernels that run all
 * T steps in one launch. Values in the inputs' dtype (f64/f32/f16/bf16), state and sums in f32
 * (f64 for f64). Launchers return a cudaError_t as int (0 = success) and never synchronize.
 *
 * Layout: on Hopper a cluster of 8 (or 16) CTAs keeps W_h (W_h^T for the backward) on chip, each
 * CTA a slice of its rows in shared memory; each step every CTA computes its slice of h_t for a
 * group of batch rows and writes it into every CTA's copy of h (distributed shared memory), then
 * the cluster meets at one barrier. Where W_h does not fit (or for f64), one CTA per batch group
 * reads W_h from global memory (L2) each step. For 16-bit values and d = 256, 512, 768, 1024 the
 * step's product runs on tensor cores (cuda/e1_mma.cuh; the backward for bf16 only): the state
 * enters it as two 16-bit parts, hi + lo (about 16 significant bits for bf16, 22 for f16), with
 * f32 accumulation; the step's other arithmetic stays in f32. */
#ifndef ENG_KCUDA_E1_H
#define ENG_KCUDA_E1_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* xw, z, y, hs [B,T,d]; W [d,d]; b [d]; h0 (NULL: zero), hT [B,d]. */
int eng_kcuda_e1_forward(eng_dtype_t dt, int64_t B, int64_t T, int64_t d, const void *xw,
                         const void *z, const void *W, const void *b, const void *h0, void *y,
                         void *hT, void *hs, cudaStream_t stream);

/* The sequential part of the backward: dxw (= d pre), dz [B,T,d] and dh0 [B,d] from z, W, hs,
 * dy [B,T,d] and dhT [B,d] (NULL: zero). dW and db are sums over the steps that the caller forms
 * from dxw (one GEMM and one reduction). */
int eng_kcuda_e1_backward(eng_dtype_t dt, int64_t B, int64_t T, int64_t d, const void *z,
                          const void *W, const void *hs, const void *dy, const void *dhT, void *dxw,
                          void *dz, void *dh0, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
