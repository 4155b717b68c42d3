/* CPU kernels of the backward ops of softmax, layer norm, RMS norm and cross-entropy, and of the
 * fused residual add + RMS norm forward, on contiguous data of floating dtypes. Each operand has
 * its own dtype (a bf16 gradient against an f32 residual stream is the common mix); values stream
 * through double blocks, every statistic and every parameter-gradient sum accumulates in double,
 * and every output is rounded once. The sums over rows (gw, gb) run in a fixed order, so results
 * do not depend on the thread count. */
#ifndef ENG_KCPU_NORM_BACKWARD_H
#define ENG_KCPU_NORM_BACKWARD_H

#include <stdint.h>

#include "eng_base.h"

/* gy, y (the forward output) and gx: [outer, n, inner] of dtype dt, normalised along n.
 * softmax: gx = y * (gy - sum_n(gy * y)); log_softmax (log_out): gx = gy - exp(y) * sum_n(gy). */
void eng_kcpu_softmax_backward(eng_dtype_t dt, int log_out, const void *gy, const void *y, void *gx,
                               int64_t outer, int64_t n, int64_t inner);

/* An operand of the norm kernels: data and its dtype. */
typedef struct {
  const void *p;
  eng_dtype_t dt;
} eng_kcpu_arg_t;

/* Backward of y = x / sqrt(mean(x^2) + eps) * w over rows of x [rows, d]. w.p may be NULL (w = 1).
 * gx [rows, d] has x's dtype; gw [d] (written when not NULL, which needs w) has gw_dt.
 * `scratch` holds `rows` doubles. */
void eng_kcpu_rms_norm_backward(eng_kcpu_arg_t gy, eng_kcpu_arg_t x, eng_kcpu_arg_t w, double eps,
                                void *gx, void *gw, eng_dtype_t gw_dt, double *scratch,
                                int64_t rows, int64_t d);

/* Backward of y = (x - mean) / sqrt(var + eps) * w + b (biased variance) over rows of x [rows, d].
 * w.p may be NULL (w = 1). gx has x's dtype; gw (needs w) and gb [d] are written when not NULL, in
 * gw_dt and gb_dt. `scratch` holds 2 * rows doubles. */
void eng_kcpu_layer_norm_backward(eng_kcpu_arg_t gy, eng_kcpu_arg_t x, eng_kcpu_arg_t w,
                                  double eps, void *gx, void *gw, eng_dtype_t gw_dt, void *gb,
                                  eng_dtype_t gb_dt, double *scratch, int64_t rows, int64_t d);

/* glogits[r] = (softmax(x[r]) - onehot(target[r])) * gloss / count for the rows whose target is
 * not ignore_index (count of them), 0 for the others; x and glogits [rows, c] of dtype dt. Targets
 * that are not ignored must already be checked to lie in [0, c). */
void eng_kcpu_cross_entropy_backward(eng_dtype_t dt, const void *x, const int64_t *target,
                                     double gloss, void *glogits, int64_t rows, int64_t c,
                                     int64_t ignore_index);

/* h = x + residual (residual.p may be NULL: h = x), stored into residual_out [rows, d] of h_dt
 * (and rounded there), then y = h / sqrt(mean(h^2) + eps) * w in x's dtype, from the stored h.
 * w.p may be NULL. */
void eng_kcpu_add_rms_norm(eng_kcpu_arg_t x, eng_kcpu_arg_t residual, eng_kcpu_arg_t w, double eps,
                           void *y, void *residual_out, eng_dtype_t h_dt, int64_t rows, int64_t d);

#endif
