/* E1, the gated Elman recurrence, on the CPU: plain loops in double, the reference of the CUDA
 * kernels. All arrays are contiguous and row-major; [B,T,d] sequences are batch-first.
 *
 *   h_t = tanh(xw_t + W_h h_{t-1} + b),   y_t = h_t * silu(z_t),   h_{-1} = h0 (zero when NULL) */
#ifndef ENG_KCPU_E1_H
#define ENG_KCPU_E1_H

#include <stdint.h>

/* xw, z, y, hs [B,T,d]; W [d,d] (row i gives pre_i); b [d]; h0, hT [B,d]. hs receives every h_t. */
void eng_kcpu_e1_forward(int64_t B, int64_t T, int64_t d, const double *xw, const double *z,
                         const double *W, const double *b, const double *h0, double *y, double *hT,
                         double *hs);

/* Gradients of the loss given dy [B,T,d] and dhT [B,d] (NULL: zero), from the saved hs:
 * dxw (= d pre), dz [B,T,d]; dW [d,d]; db [d]; dh0 [B,d]. */
void eng_kcpu_e1_backward(int64_t B, int64_t T, int64_t d, const double *z, const double *W,
                          const double *h0, const double *hs, const double *dy, const double *dhT,
                          double *dxw, double *dz, double *dW, double *db, double *dh0);

/* dW[i][j] = sum over (b,t) of g[b,t,i] * x[b,t,j], where x is hs shifted one step back (the step
 * before each t: h0 or zero at t = 0) when `shift`, else hs itself; also used by E23. */
void eng_kcpu_seq_outer(int64_t B, int64_t T, int64_t d, const double *g, const double *hs,
                        const double *h0, int shift, double *dW);

#endif
