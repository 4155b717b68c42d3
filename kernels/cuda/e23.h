/* CUDA E23 recurrence (the dual-memory cell of kernels/cpu/e23.h): persistent kernels running all
 * T steps in one launch. Values in the inputs' dtype, tape, state and sums in f32 (f64 for f64).
 * Launchers return a cudaError_t as int (0 = success) and never synchronize.
 *
 * Layout: on Hopper a cluster of 8 (or 16) CTAs splits the d units: each CTA owns a slice of the
 * rows of W_h and W_write (in shared memory) and the same slice of the tape's columns, so the
 * read (H^T r) and the write are local; the tape-times-h scores are summed from every CTA's
 * partial sums through distributed shared memory. Two cluster barriers per step: after h_t, and
 * after the partial scores (whose softmax every CTA then computes itself); the next step's read
 * scores follow from this step's without another pass over the tape:
 *   H_new h_t = (1 - a) * (H h_t) + a * (w . h_t).
 * Where the weights do not fit (or for f64), one CTA per batch group does every unit, reading the
 * weights from global memory. The backward replays each segment of C steps from its tape
 * checkpoint into a scratch buffer (the segment's tapes), then walks it backwards with two cluster
 * barriers per step, holding W_h^T and W_write^T slices on chip. For 16-bit values at d = 256 and
 * 512 the forward's products run on tensor cores, and for bf16 there the backward's too (its
 * replay then takes a, r and w from the trace that every forward writes into ckpt, and exchanges
 * nothing). */
#ifndef ENG_KCUDA_E23_H
#define ENG_KCUDA_E23_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of global scratch the forward (backward when `backward`) needs for these sizes on the
 * current device (0 when none). */
int eng_kcuda_e23_scratch(eng_dtype_t dt, int64_t B, int64_t N, int64_t d, int64_t C, int backward,
                          size_t *bytes);

/* xw, hs [B,T,d]; Wh, Ww [d,d]; b [d]; h0 (NULL: zero), hT [B,d]; tape0 (NULL: zero), tapeT
 * [B,N,d]; ckpt [B,eng_e23_ckpt_len] (cpu/e23.h: checkpoints, then the trace a, r, w) in the
 * state dtype (f32; f64 for f64). */
int eng_kcuda_e23_forward(eng_dtype_t dt, int64_t B, int64_t T, int64_t N, int64_t d, int64_t C,
                          const void *xw, const void *Wh, const void *Ww, const void *b,
                          const void *h0, const void *tape0, void *hs, void *hT, void *tapeT,
                          void *ckpt, void *scratch, cudaStream_t stream);

/* The sequential part of the backward: dxw [B,T,d], dw (dL/dw of every step, [B,T,d], for
 * dW_write), dh0 [B,d] and dtape0 [B,N,d], from the forward's inputs, hs, ckpt (state dtype),
 * dhs [B,T,d], dhT [B,d] and dtapeT [B,N,d] (both NULL: zero). db [d] (the sum of dxw over b and
 * t) too where the kernel sums it as it goes (the register-tape backward): then *db_done = 1;
 * else the caller sums dxw. */
int eng_kcuda_e23_backward(eng_dtype_t dt, int64_t B, int64_t T, int64_t N, int64_t d, int64_t C,
                           const void *xw, const void *Wh, const void *Ww, const void *b,
                           const void *h0, const void *hs, const void *ckpt, const void *dhs,
                           const void *dhT, const void *dtapeT, void *dxw, void *dw, void *dh0,
                           void *dtape0, void *db, int *db_done, void *scratch,
                           cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
