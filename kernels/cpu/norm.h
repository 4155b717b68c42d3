/* CPU row kernels of the normalisation ops, on contiguous data of a floating dtype. Rows stream
 * through double blocks: statistics accumulate in double and every output is rounded once. */
#ifndef ENG_KCPU_NORM_H
#define ENG_KCPU_NORM_H

#include <stdint.h>

#include "eng_base.h"

/* Softmax (log-softmax when `log_out`) of x [outer, n, inner] along the middle dim into y of the
 * same layout and dtype; the max is subtracted first. */
void eng_kcpu_softmax(eng_dtype_t dt, int log_out, const void *x, void *y, int64_t outer, int64_t n,
                      int64_t inner);

/* y = (x - mean) / sqrt(var + eps) * w + b per row of x [rows, d], with the biased variance;
 * w and b are [d] of x's dtype and may be NULL. */
void eng_kcpu_layer_norm(eng_dtype_t dt, const void *x, const void *w, const void *b, void *y,
                         int64_t rows, int64_t d, double eps);

/* y = x / sqrt(mean(x^2) + eps) * w per row of x [rows, d]; w is [d] or NULL. */
void eng_kcpu_rms_norm(eng_dtype_t dt, const void *x, const void *w, void *y, int64_t rows,
                       int64_t d, double eps);

#endif
