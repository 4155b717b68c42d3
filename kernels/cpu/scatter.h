/* CPU scatter-adds for the gradients of indexing (index_add, scatter_add): the mirror of
 * eng_kcpu_take. Shapes and strides are in elements. */
#ifndef ENG_KCPU_SCATTER_H
#define ENG_KCPU_SCATTER_H

#include <stdint.h>

#include "eng_base.h"

/* Over the iteration shape[0..ndim-1] (1 <= ndim <= ENG_MAX_DIMS), for each position c:
 *   acc[sum_{d != dim} c_d * acc_stride[d] + idx[sum_d c_d * idx_stride[d]] * pick_stride]
 *     += src[sum_d c_d * src_stride[d]]
 * acc is f64, f32, i32 or i64; src is acc's dtype, or f16/bf16 when acc is f32 (widened on
 * load). acc_stride[dim] is not used. Positions that differ off `dim` must reach distinct acc
 * elements (acc is a dense tensor over the other dims). Indices must already be in range.
 * Deterministic: threads split the positions off `dim`, and every acc element receives its
 * additions one by one in ascending c_dim. Returns 0, -1 for a dtype pair it does not take, -2 when out of memory. */
int eng_kcpu_scatter_add(void *acc, eng_dtype_t acc_dt, const int64_t *acc_stride,
                         int64_t pick_stride, const void *src, eng_dtype_t src_dt,
                         const int64_t *src_stride, const int64_t *idx, const int64_t *idx_stride,
                         int ndim, const int64_t *shape, int dim);

#endif
