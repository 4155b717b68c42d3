/* Fills for the creation ops; dst is contiguous. */
#ifndef ENG_KCPU_CREATE_H
#define ENG_KCPU_CREATE_H

#include <stdint.h>

#include "eng_base.h"

/* dst[i] = start + i * step. With `linspace`, the second half counts back from `end`
 * (end - (n-1-i) * step) so that the last element is exactly end; n == 1 gives {start}. */
void eng_kcpu_arange(void *dst, eng_dtype_t dt, int64_t n, double start, double step, double end,
                     int linspace);
/* rows x cols identity: 1 on the main diagonal, 0 elsewhere. */
void eng_kcpu_eye(void *dst, eng_dtype_t dt, int64_t rows, int64_t cols);

#endif
