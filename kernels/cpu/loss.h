/* CPU kernel of the cross-entropy loss. */
#ifndef ENG_KCPU_LOSS_H
#define ENG_KCPU_LOSS_H

#include <stdint.h>

#include "eng_base.h"

/* Sum, in double, over the rows r of contiguous logits x [rows, c] (floating dtype) whose
 * target[r] != ignore_index, of logsumexp(x[r, :]) - x[r, target[r]]; *count gets the number of
 * such rows. Targets that are not ignored must already be checked to lie in [0, c). */
double eng_kcpu_cross_entropy_sum(eng_dtype_t dt, const void *x, const int64_t *target,
                                  int64_t rows, int64_t c, int64_t ignore_index, int64_t *count);

#endif
