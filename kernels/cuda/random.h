/* Random fills from Philox4x32-10 on the device, reproducing kernels/cpu/random.c bit for bit:
 * element i uses word i%4 of block block0 + i/4 under key `seed` (see the RNG comment of
 * eng_tensor.h for the formulas). dst is contiguous. Each returns a cudaError_t (0 = success). */
#ifndef ENG_KCUDA_RANDOM_H
#define ENG_KCUDA_RANDOM_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Uniform in [low, high); floating dtypes. */
int eng_kcuda_uniform(void *dst, eng_dtype_t dt, int64_t n, uint64_t seed, uint64_t block0,
                      double low, double high, cudaStream_t stream);
/* mean + std * (Box-Muller normal); floating dtypes. */
int eng_kcuda_normal(void *dst, eng_dtype_t dt, int64_t n, uint64_t seed, uint64_t block0,
                     double mean, double std, cudaStream_t stream);
/* low + (w * range >> 32), range in [1, 2^32]; every dtype. */
int eng_kcuda_randint(void *dst, eng_dtype_t dt, int64_t n, uint64_t seed, uint64_t block0,
                      int64_t low, uint64_t range, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
