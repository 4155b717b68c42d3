/* Moving strided runs of elements between a storage dtype and the compute types of the row
 * kernels (double for floating data, int64 for integers), one small block at a time, so that one
 * compute path serves every dtype. Positions and strides are in elements. */
#ifndef ENG_KCPU_BLOCK_IO_H
#define ENG_KCPU_BLOCK_IO_H

#include <stdint.h>

#include "eng_base.h"

/* Elements per block the row kernels stream through their stack buffers. */
#define ENG_KCPU_BLOCK 256

/* dst[k] = x[start + k*stride] for k < m, as doubles; any dtype. */
void eng_kcpu_load_f64(double *dst, const void *x, eng_dtype_t dt, int64_t start, int64_t stride,
                       int64_t m);
/* y[start + k*stride] = src[k], rounded once; floating dtypes. */
void eng_kcpu_store_f64(void *y, eng_dtype_t dt, int64_t start, int64_t stride, const double *src,
                        int64_t m);
/* dst[k] = x[start + k*stride] for k < m, exactly; integer dtypes. */
void eng_kcpu_load_i64(int64_t *dst, const void *x, eng_dtype_t dt, int64_t start, int64_t stride,
                       int64_t m);
/* y[start + k] = src[k]; integer dtypes, values already in the dtype's range. */
void eng_kcpu_store_i64(void *y, eng_dtype_t dt, int64_t start, const int64_t *src, int64_t m);

#endif
