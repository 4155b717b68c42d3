/* E88, the nonlinear matrix-state delta rule, on the CPU: the reference for the CUDA kernels.
 * Per batch b and head h, with S [n, v] starting at S0 (or zero), each step t does
 *   k^ = k_t / (|k_t| + 1e-6), q^ = q_t / (|q_t| + 1e-6)      (l2; else k^ = k_t, q^ = q_t)
 *   delta = v_t - S^T k^;   S <- tanh(decay_t S + k^ delta^T)  (linear_state: no tanh)
 *   o_t = S^T q^ (the new S);   y_t = o_t * silu(g_t)          (no gate: y_t = o_t)
 * Layout (contiguous, batch-first): q, k [B,T,H,n]; v, g, y [B,T,H,v]; decay [B,T,H];
 * S0, S_T [B,H,n,v]; ckpt [B,H,W] is what the backward needs of the forward, per (b, h):
 *   [nck][n*v]  the state before steps 0, C, 2C, ... (nck = ceil(T/C), C = ckpt_every),
 *   [T][v]      delta of every step,
 *   [T][v]      o of every step (before the gate),
 * W = eng_e88_ckpt_len (the backward replays S from a checkpoint with the saved delta, which needs
 * no sum over n, and takes o for dg instead of recomputing it). Values are in `dt`, states (S0,
 * S_T, ckpt, dS_T, dS0) in `sdt` (f64 for f64 values, else f32). Everything is computed in double,
 * one (b, h) per OpenMP iteration. */
#ifndef ENG_KCPU_E88_H
#define ENG_KCPU_E88_H

#include <stdint.h>

#include "eng_base.h"

typedef struct {
  int64_t B, T, H, n, v;
  int64_t ckpt_every; /* C >= 1 */
  int l2, linear_state;
} eng_e88_shape_t;

/* The checkpoint interval C when none is asked for: 8 at n = 32, else 16. Measured on an H100
 * (docs/PERF.md, session 19): the CUDA backward walks at most 8-9 steps of n = 32 states in one
 * chunk, so a 16-step interval was replayed half again (the later chunk from its checkpoint);
 * 8-step intervals replay no step twice: -6% backward for +44% checkpoint bytes at the 436.7M
 * model's layer. At n = 16 one chunk holds 16 steps (8 only adds chunks: +7%), and n = 64 gains
 * nothing for its bytes. */
static inline int64_t eng_e88_default_ckpt_every(int64_t n) { return n == 32 ? 8 : 16; }

/* Number of checkpoints: ceil(T / C). */
static inline int64_t eng_e88_n_ckpt(int64_t T, int64_t C) { return (T + C - 1) / C; }

/* ckpt's elements per (b, h), and where its delta and o parts start in them. */
static inline int64_t eng_e88_ckpt_delta_at(const eng_e88_shape_t *s) {
  return eng_e88_n_ckpt(s->T, s->ckpt_every) * s->n * s->v;
}
static inline int64_t eng_e88_ckpt_o_at(const eng_e88_shape_t *s) {
  return eng_e88_ckpt_delta_at(s) + s->T * s->v;
}
static inline int64_t eng_e88_ckpt_len(const eng_e88_shape_t *s) {
  return eng_e88_ckpt_o_at(s) + s->T * s->v;
}

/* g, S0 may be NULL; S_T and ckpt may be NULL (not wanted). Returns 0, or -1 when out of memory. */
int eng_kcpu_e88_forward(eng_dtype_t dt, eng_dtype_t sdt, const eng_e88_shape_t *s, const void *q,
                         const void *k, const void *v, const void *decay, const void *g,
                         const void *S0, void *y, void *S_T, void *ckpt);

/* Reverse mode of the forward above: each segment of C steps is recomputed from its checkpoint
 * with the saved delta, then walked backward, taking the saved o for dg (v itself is not read).
 * dy [B,T,H,v]; dS_T may be NULL (zero). Writes dq, dk [B,T,H,n], dv [B,T,H,v], ddecay [B,T,H],
 * dg (when g is given) in dt, and dS0 (when not NULL) in sdt. Returns 0, or -1 when out of
 * memory. */
int eng_kcpu_e88_backward(eng_dtype_t dt, eng_dtype_t sdt, const eng_e88_shape_t *s, const void *q,
                          const void *k, const void *v, const void *decay, const void *g,
                          const void *ckpt, const void *dy, const void *dS_T, void *dq, void *dk,
                          void *dv, void *ddecay, void *dg, void *dS0);

#endif
