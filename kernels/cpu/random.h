/* Random fills from Philox4x32-10. Element i of a draw uses block block0 + i/4, word i%4 (see the
 * RNG comment of eng_tensor.h for the formulas, which the GPU reproduces). dst is contiguous. */
#ifndef ENG_KCPU_RANDOM_H
#define ENG_KCPU_RANDOM_H

#include <stdint.h>

#include "eng_base.h"

/* low + (high - low) * u, u = w * 2^-32 for f64, (w >> 8) * 2^-24 otherwise. */
void eng_kcpu_uniform(void *dst, eng_dtype_t dt, int64_t n, uint64_t seed, uint64_t block0,
                      double low, double high);
/* mean + std * (Box-Muller normal from word pairs (0,1) and (2,3) of each block). */
void eng_kcpu_normal(void *dst, eng_dtype_t dt, int64_t n, uint64_t seed, uint64_t block0,
                     double mean, double std);
/* low + (w * range >> 32), range in [1, 2^32]. */
void eng_kcpu_randint(void *dst, eng_dtype_t dt, int64_t n, uint64_t seed, uint64_t block0,
                      int64_t low, uint64_t range);

#endif
