/* CPU gathers for the indexing ops: one kernel picks elements along a dim by an index tensor
 * (embedding, index_select and gather are all it with different strides), and a bounds check runs
 * before it. Elements are moved as raw bytes, so every dtype works. Shapes and strides are in
 * elements. */
#ifndef ENG_KCPU_INDEX_H
#define ENG_KCPU_INDEX_H

#include <stddef.h>
#include <stdint.h>

/* Writes the contiguous output of shape[0..ndim-1]; for each output position c:
 *   out[c] = x[sum_d c_d * x_stride[d] + idx[sum_d c_d * idx_stride[d]] * pick_stride]
 * Index values must already be in range. */
void eng_kcpu_take(void *out, const void *x, size_t elem_size, int ndim, const int64_t *shape,
                   const int64_t *x_stride, const int64_t *idx, const int64_t *idx_stride,
                   int64_t pick_stride);

/* The position of the first value of idx[0..n-1] outside [0, limit), or -1 when all are in range. */
int64_t eng_kcpu_first_out_of_range(const int64_t *idx, int64_t n, int64_t limit);

#endif
