/* Fills a strided N-d array with one value. */
#ifndef ENG_KCPU_FILL_H
#define ENG_KCPU_FILL_H

#include <stdint.h>

#include "eng_base.h"

/* Every element of dst (strides in elements, 0 allowed) becomes `value` rounded to dt. */
void eng_kcpu_fill(void *dst, eng_dtype_t dt, const int64_t *stride, const int64_t *shape, int ndim,
                   double value);

#endif
