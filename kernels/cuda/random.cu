// Philox4x32-10 random fills, bit-identical to kernels/cpu/random.c: one thread per Philox block
// makes its (up to) 4 elements. The formulas are the CPU's, in double; the _rn intrinsics keep
// nvcc from fusing a multiply and an add into an fma, which the CPU does not do. log/sin/cos are
// CUDA's (within an ulp or two of glibc's in double, so f64 randn may differ in the last bits).
#include "cuda/common.cuh"
#include "cuda/convert.cuh"
#include "cuda/random.h"

namespace {

using namespace eng_kc;
using namespace eng_kc::cvt;

constexpr int THREADS = 256;
constexpr double TWO_PI = 6.283185307179586476925286766559;

// kernels/cpu/philox.c with the engine's layout: counter {lo, hi of block, 0, 0}, key {lo, hi of seed}.
__device__ __forceinline__ void philox_block(uint64_t seed, uint64_t block, uint32_t out[4]) {
  const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; round++) {
    if (round > 0) {
      k0 += W0;
      k1 += W1;
    }
    const uint32_t hi0 = __umulhi(M0, c0), lo0 = M0 * c0;
    const uint32_t hi1 = __umulhi(M1, c2), lo1 = M1 * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// The 4 elements of one block, stored with one vector store when they are all in range.
template <int D> struct alignas(4 * sizeof(st_t<D>) < 16 ? 4 * sizeof(st_t<D>) : 16) Pack4 {
  st_t<D> v[4];
};

// low + (high - low) * u, u = w * 2^-32 for f64, (w >> 8) * 2^-24 otherwise.
struct Uniform {
  double low, scale;
  template <int D> __device__ void values(const uint32_t w[4], st_t<D> v[4]) const {
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const double u = D == ENG_F64 ? (double)w[j] * 0x1p-32 : (double)(w[j] >> 8) * 0x1p-24;
      v[j] = from_f64<D>(__dadd_rn(low, __dmul_rn(scale, u)));
    }
  }
};

// Box-Muller on word pairs (0,1) and (2,3): cos for the even element, sin for the odd one.
struct Normal {
  double mean, std;
  template <int D> __device__ void values(const uint32_t w[4], st_t<D> v[4]) const {
#pragma unroll
    for (int p = 0; p < 2; p++) {
      const double u1 = __dmul_rn(__dadd_rn((double)w[2 * p], 1.0), 0x1p-32); /* (0, 1] */
      const double u2 = __dmul_rn((double)w[2 * p + 1], 0x1p-32);
      const double r = __dsqrt_rn(__dmul_rn(-2.0, log(u1)));
      const double t = __dmul_rn(TWO_PI, u2);
      v[2 * p] = from_f64<D>(__dadd_rn(mean, __dmul_rn(std, __dmul_rn(r, cos(t)))));
      v[2 * p + 1] = from_f64<D>(__dadd_rn(mean, __dmul_rn(std, __dmul_rn(r, sin(t)))));
    }
  }
};

// low + (w * range >> 32); i64 keeps the integer exactly, other dtypes store it as the CPU does.
struct RandInt {
  int64_t low;
  uint64_t range;
  template <int D> __device__ void values(const uint32_t w[4], st_t<D> v[4]) const {
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int64_t x = low + (int64_t)(((uint64_t)w[j] * range) >> 32);
      if constexpr (D == ENG_I64)
        v[j] = x;
      else
        v[j] = from_f64<D>((double)x);
    }
  }
};

template <int D, typename Gen>
__global__ void random_fill(st_t<D> *dst, int64_t n, uint64_t seed, uint64_t block0, Gen gen, bool packed) {
  const int64_t nb = (n + 3) / 4;
  const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t b = first; b < nb; b += stride) {
    uint32_t w[4];
    philox_block(seed, block0 + (uint64_t)b, w);
    Pack4<D> p;
    gen.template values<D>(w, p.v);
    const int64_t i0 = 4 * b;
    if (packed && i0 + 4 <= n) {
      reinterpret_cast<Pack4<D> *>(dst)[b] = p;
    } else {
      for (int j = 0; j < 4 && i0 + j < n; j++) dst[i0 + j] = p.v[j];
    }
  }
}

template <int D, typename Gen>
int launch(void *dst, int64_t n, uint64_t seed, uint64_t block0, const Gen &gen, cudaStream_t stream) {
  const int64_t nb = (n + 3) / 4;
  const bool packed = (uintptr_t)dst % alignof(Pack4<D>) == 0;
  random_fill<D, Gen><<<blocks_for(nb, THREADS), THREADS, 0, stream>>>(static_cast<st_t<D> *>(dst), n, seed,
                                                                      block0, gen, packed);
  return (int)cudaGetLastError();
}

}  // namespace

extern "C" int eng_kcuda_uniform(void *dst, eng_dtype_t dt, int64_t n, uint64_t seed, uint64_t block0,
                                 double low, double high, cudaStream_t stream) {
  if (n == 0) return 0;
  const Uniform gen{low, high - low};
  int err = (int)cudaErrorInvalidValue;
  ENG_KC_FLOAT_DTYPE_CASES(D, dt, err = launch<D>(dst, n, seed, block0, gen, stream));
  return err;
}

extern "C" int eng_kcuda_normal(void *dst, eng_dtype_t dt, int64_t n, uint64_t seed, uint64_t block0,
                                double mean, double std, cudaStream_t stream) {
  if (n == 0) return 0;
  const Normal gen{mean, std};
  int err = (int)cudaErrorInvalidValue;
  ENG_KC_FLOAT_DTYPE_CASES(D, dt, err = launch<D>(dst, n, seed, block0, gen, stream));
  return err;
}

extern "C" int eng_kcuda_randint(void *dst, eng_dtype_t dt, int64_t n, uint64_t seed, uint64_t block0,
                                 int64_t low, uint64_t range, cudaStream_t stream) {
  if (n == 0) return 0;
  const RandInt gen{low, range};
  int err = (int)cudaErrorInvalidValue;
  ENG_KC_DTYPE_CASES(D, dt, err = launch<D>(dst, n, seed, block0, gen, stream));
  return err;
}
