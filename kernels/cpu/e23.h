/* E23, the dual-memory Elman recurrence, on the CPU: plain loops in double, the reference of the
 * CUDA kernels. A tape H [N,d] of N slots and a working memory h [d] per batch row; scale = 1/sqrt(d):
 *
 *   r = softmax(scale H h_{t-1}),  read = H^T r
 *   h_t = tanh(W_h h_{t-1} + xw_t + read + b)
 *   w = W_write h_t,  a = softmax(scale H h_t)          (H before this step's write)
 *   H[i,:] <- (1 - a_i) H[i,:] + a_i w
 *
 * Arrays are contiguous, batch-first: xw, hs [B,T,d]; W_h, W_write [d,d]; b [d]; h0, hT [B,d];
 * tapes [B,N,d]; ckpt [B,W] (W = eng_e23_ckpt_len), per batch row:
 *   [K][N][d]  the tape before steps 0, C, 2C, ... (K = ceil(T/C)),
 *   [T][N]     a_t, the write weights of every step (at eng_e23_ckpt_a_at),
 *   [T][N]     r_t, the read weights of every step (at eng_e23_ckpt_r_at),
 *   [T][d]     w_t = W_write h_t of every step (at eng_e23_ckpt_w_at).
 * The backward keeps no tape history: it replays one segment of C steps at a time from the
 * checkpoints. This reference recomputes the weights and w there; the CUDA tensor-core backward
 * takes them from the trace (H_{t+1} = (1 - a_t) H_t + a_t w_t^T with no scores to exchange), so
 * both agree for a ckpt that the forward wrote. */
#ifndef ENG_KCPU_E23_H
#define ENG_KCPU_E23_H

#include <stdint.h>

static inline int64_t eng_e23_n_ckpt(int64_t T, int64_t C) { return (T + C - 1) / C; }

/* Where ckpt's parts start in a batch row, and the row's length. */
static inline int64_t eng_e23_ckpt_a_at(int64_t T, int64_t N, int64_t d, int64_t C) {
  return eng_e23_n_ckpt(T, C) * N * d;
}
static inline int64_t eng_e23_ckpt_r_at(int64_t T, int64_t N, int64_t d, int64_t C) {
  return eng_e23_ckpt_a_at(T, N, d, C) + T * N;
}
static inline int64_t eng_e23_ckpt_w_at(int64_t T, int64_t N, int64_t d, int64_t C) {
  return eng_e23_ckpt_r_at(T, N, d, C) + T * N;
}
static inline int64_t eng_e23_ckpt_len(int64_t T, int64_t N, int64_t d, int64_t C) {
  return eng_e23_ckpt_w_at(T, N, d, C) + T * d;
}

/* h0, tape0 may be NULL (zeros). */
void eng_kcpu_e23_forward(int64_t B, int64_t T, int64_t N, int64_t d, int64_t C, const double *xw,
                          const double *Wh, const double *Ww, const double *b, const double *h0,
                          const double *tape0, double *hs, double *hT, double *tapeT,
                          double *ckpt);

/* Gradients for every input given dhs [B,T,d], dhT [B,d] and dtapeT [B,N,d] (the last two may be
 * NULL: zero): dxw [B,T,d], dWh, dWw [d,d], db [d], dh0 [B,d], dtape0 [B,N,d]. */
void eng_kcpu_e23_backward(int64_t B, int64_t T, int64_t N, int64_t d, int64_t C,
                           const double *xw, const double *Wh, const double *Ww, const double *b,
                           const double *h0, const double *hs, const double *ckpt,
                           const double *dhs, const double *dhT, const double *dtapeT, double *dxw,
                           double *dWh, double *dWw, double *db, double *dh0, double *dtape0);

#endif
