/* CPU reductions. The op layer brings its input into a contiguous [outer, n, inner] array whose
 * middle dim is the reduced one (reduced dims merged, or permuted to the end and copied), so that
 * one kernel covers row reductions (inner = 1) and column reductions (tiles across inner). */
#ifndef ENG_KCPU_REDUCE_H
#define ENG_KCPU_REDUCE_H

#include <stdint.h>

#include "eng_ops.h"

/* y[o, i] = op over x[o, :, i]; y is contiguous [outer, inner].
 * Floating dtypes accumulate in double and round once into y (same dtype). Integer dtypes:
 * SUM wraps in int64 and y is i64; MAX/MIN are exact and y has x's dtype; other ops are not
 * taken. MAX/MIN propagate NaN and need n >= 1. MEAN of n = 0 is NaN. VAR/STD are two-pass
 * and divide by max(n - correction, 0). */
void eng_kcpu_reduce(eng_reduce_op_t op, eng_dtype_t dt, const void *x, void *y, int64_t outer,
                     int64_t n, int64_t inner, double correction);

/* y[o, i] = the first index along the middle dim of the max of x[o, :, i]; a NaN counts as the
 * max (the first NaN wins). Any dtype; n >= 1. */
void eng_kcpu_argmax(eng_dtype_t dt, const void *x, int64_t *y, int64_t outer, int64_t n,
                     int64_t inner);

#endif
