/* E88 on CUDA: the forward and the checkpointed backward of kernels/cpu/e88.h, for f32, f16 and
 * bf16 values (states, checkpoints and accumulation in f32), n_state in {16, 32, 64} and v a
 * multiple of 256/n with n*v <= 4096; ckpt_every <= 64 for the backward. The f16/bf16 kernels use
 * the hardware tanh (tanh.approx.f32, relative error 2^-11, below their rounding); f32 uses tanhf.
 * Launchers return a cudaError_t as int (0 = success) and never synchronize. */
#ifndef ENG_KCUDA_E88_H
#define ENG_KCUDA_E88_H

#include <cuda_runtime_api.h>

#include "cpu/e88.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the kernels take these sizes (see above); when not, *why says which rule fails. */
int eng_kcuda_e88_supported(const eng_e88_shape_t *s, int backward, const char **why);

/* g, S0 may be NULL; S_T, ckpt may be NULL (not wanted). */
int eng_kcuda_e88_forward(eng_dtype_t dt, const eng_e88_shape_t *s, const void *q, const void *k,
                          const void *v, const void *decay, const void *g, const float *S0,
                          void *y, float *S_T, float *ckpt, cudaStream_t stream);

/* The steps of one replay chunk that eng_kcuda_e88_backward takes for these sizes (gate: whether g
 * is given): a segment longer than that is replayed for each chunk from its checkpoint. Chosen
 * by occupancy, so it depends on the GPU. */
int eng_kcuda_e88_backward_chunk(eng_dtype_t dt, const eng_e88_shape_t *s, int gate, int *steps);

/* g, dS_T may be NULL; dg is written when g is given, dS0 when not NULL. */
int eng_kcuda_e88_backward(eng_dtype_t dt, const eng_e88_shape_t *s, const void *q, const void *k,
                           const void *v, const void *decay, const void *g, const float *ckpt,
                           const void *dy, const float *dS_T, void *dq, void *dk, void *dv,
                           void *ddecay, void *dg, float *dS0, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
