/* Strided N-d copy with dtype conversion. */
#ifndef ENG_KCPU_COPY_H
#define ENG_KCPU_COPY_H

#include <stdint.h>

#include "eng_base.h"

/* dst[idx] = convert(src[idx]) for every idx of `shape`. Strides are in elements; src strides may
 * be 0 (broadcast). The two arrays must not overlap. Conversion goes through double (exact for
 * every dtype but i64 beyond 2^53), with the rounding and saturation of cpu/convert.h; same-dtype
 * copies move the bits unchanged. */
void eng_kcpu_copy(void *dst, eng_dtype_t dst_dt, const int64_t *dst_stride, const void *src,
                   eng_dtype_t src_dt, const int64_t *src_stride, const int64_t *shape, int ndim);

#endif
