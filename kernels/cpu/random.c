#include "cpu/random.h"

#include <math.h>

#include "cpu/convert.h"
#include "cpu/philox.h"

#define PARALLEL_MIN 16384
#define TWO_PI 6.283185307179586476925286766559

/* Runs BODY for every element i of a draw of n, with w = the 4 words of i's block and j = i % 4. */
#define FOR_EACH_DRAW(BODY)                                                   \
  do {                                                                        \
    const int64_t nb = (n + 3) / 4;                                           \
    _Pragma("omp parallel for schedule(static) if (n >= PARALLEL_MIN)")      \
    for (int64_t b = 0; b < nb; b++) {                                        \
      uint32_t w[4];                                                          \
      eng_philox_block(seed, block0 + (uint64_t)b, w);                        \
      for (int j = 0; j < 4 && 4 * b + j < n; j++) {                          \
        const int64_t i = 4 * b + j;                                          \
        BODY;                                                                 \
      }                                                                       \
    }                                                                         \
  } while (0)

void eng_kcpu_uniform(void *dst, eng_dtype_t dt, int64_t n, uint64_t seed, uint64_t block0,
                      double low, double high) {
  const double scale = high - low;
  FOR_EACH_DRAW({
    double u = dt == ENG_F64 ? w[j] * 0x1p-32 : (w[j] >> 8) * 0x1p-24;
    eng_k_store(dst, dt, i, low + scale * u);
  });
}

void eng_kcpu_normal(void *dst, eng_dtype_t dt, int64_t n, uint64_t seed, uint64_t block0,
                     double mean, double std) {
  FOR_EACH_DRAW({
    int p = j / 2;
    double u1 = (w[2 * p] + 1.0) * 0x1p-32; /* in (0, 1]: log stays finite */
    double u2 = w[2 * p + 1] * 0x1p-32;
    double r = sqrt(-2.0 * log(u1));
    double z = (j % 2 == 0) ? r * cos(TWO_PI * u2) : r * sin(TWO_PI * u2);
    eng_k_store(dst, dt, i, mean + std * z);
  });
}

void eng_kcpu_randint(void *dst, eng_dtype_t dt, int64_t n, uint64_t seed, uint64_t block0,
                      int64_t low, uint64_t range) {
  FOR_EACH_DRAW({
    int64_t v = low + (int64_t)(((uint64_t)w[j] * range) >> 32);
    if (dt == ENG_I64)
      ((int64_t *)dst)[i] = v; /* exact, whatever its size */
    else
      eng_k_store(dst, dt, i, (double)v);
  });
}
