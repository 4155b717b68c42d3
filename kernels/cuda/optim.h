/* Multi-tensor optimizer kernels on the GPU: AdamW, sums of squares and in-place scaling over a
 * list of dense tensors in one launch. The list travels as a kernel parameter (a table of up to
 * ENG_KCUDA_MT_MAX tensors, a few KB), so a launch needs no host buffer and no copy: it is safe
 * in stream order and under CUDA-graph capture. Longer lists take a launch per
 * ENG_KCUDA_MT_MAX tensors. Each block works on one chunk (ENG_K_SUMSQ_CHUNK elements) of one
 * tensor; the math is that of the CPU kernels (kernels/cpu/optim.h). */
#ifndef ENG_KCUDA_OPTIM_H
#define ENG_KCUDA_OPTIM_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "cpu/optim.h"
#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ENG_KCUDA_MT_MAX 160

/* One dense tensor of a list: ptr[0] the tensor written (the param, or x), and for AdamW ptr[1]
 * the grad, ptr[2] exp_avg, ptr[3] exp_avg_sq (in the math type: double for f64 params, else
 * float). dt is ptr[0]'s dtype, gdt the grad's. */
typedef struct {
  void *ptr[4];
  int64_t n;
  eng_dtype_t dt, gdt;
} eng_kcuda_mt_tensor_t;

/* One AdamW step over the list (dtype pairs as eng_kcpu_adamw). Returns a cudaError_t
 * (cudaErrorInvalidValue for a pair it does not take). */
int eng_kcuda_adamw(const eng_kcuda_mt_tensor_t *ts, int n, const eng_k_adamw_t *h,
                    cudaStream_t stream);

/* How many f64 partial sums eng_kcuda_sum_squares needs for the list (one per chunk). */
int64_t eng_kcuda_sum_squares_partials(const eng_kcuda_mt_tensor_t *ts, int n);
/* *out (a device scalar of out_dt, f32 or f64) = sum over the list of sum(x^2), accumulated in
 * f64: the chunk sums go to partials (device memory, eng_kcuda_sum_squares_partials of them),
 * then one block adds them in a fixed order, so the result is the same on every run. */
int eng_kcuda_sum_squares(const eng_kcuda_mt_tensor_t *ts, int n, double *partials, void *out,
                          eng_dtype_t out_dt, cudaStream_t stream);

/* x *= s for every tensor of the list, s read on the device from scale (one element of a
 * floating dtype): products in f32 ((float)s), f64 for f64 tensors, rounded once. */
int eng_kcuda_scale(const eng_kcuda_mt_tensor_t *ts, int n, const void *scale,
                    eng_dtype_t scale_dt, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
