// Row loops over operands of different dtypes (the backward kernels: a bf16 gradient against an
// f32 residual stream). A thread takes chunks of a row: 8 consecutive elements when every operand
// is 16-byte aligned and the row length a multiple of 8 (each operand then loads its chunk with
// one to four 16-byte loads, whatever its element size), else single elements. Chunk c of a row
// belongs to thread c % blockDim.x in every pass, so a thread reads back what it wrote itself
// and owns the same columns in every row.
#pragma once

#include <stdint.h>

#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/rows.cuh"

namespace eng_kc {
namespace chunks {

constexpr int kChunk = 8;
using Vec = std::integral_constant<int, kChunk>;
using One = std::integral_constant<int, 1>;

// Rows of n elements at p (NULL: an absent operand) can be read in chunks of 8.
inline bool chunk_rows(const void *p, int64_t n) {
  return p == nullptr || ((uintptr_t)p % 16 == 0 && n % kChunk == 0);
}

// M elements of p (16-byte aligned when M == 8) as A.
template <int M, typename T, typename A> __device__ __forceinline__ void ld(const T *p, A (&v)[M]) {
  if constexpr (M == kChunk) {
    alignas(16) T buf[kChunk];
#pragma unroll
    for (int i = 0; i < (int)(kChunk * sizeof(T) / 16); i++)
      reinterpret_cast<int4 *>(buf)[i] = reinterpret_cast<const int4 *>(p)[i];
#pragma unroll
    for (int e = 0; e < kChunk; e++) v[e] = (A)load(&buf[e]);
  } else {
    v[0] = (A)load(p);
  }
}

// M values into p (16-byte aligned when M == 8), each rounded once.
template <int M, typename T, typename A> __device__ __forceinline__ void st(T *p, const A (&v)[M]) {
  if constexpr (M == kChunk) {
    alignas(16) T buf[kChunk];
#pragma unroll
    for (int e = 0; e < kChunk; e++) store(&buf[e], (acc_t<T>)v[e]);
#pragma unroll
    for (int i = 0; i < (int)(kChunk * sizeof(T) / 16); i++)
      reinterpret_cast<int4 *>(p)[i] = reinterpret_cast<const int4 *>(buf)[i];
  } else {
    store(p, (acc_t<T>)v[0]);
  }
}

// f(k0, width) for this thread's chunks of a row of n: elements k0 .. k0 + width - 1, width an
// integral constant (8 or 1).
template <typename F> __device__ __forceinline__ void for_chunks(int64_t n, bool vec, F f) {
  const int t = threadIdx.x, G = blockDim.x;
  if (vec) {
    for (int64_t c = t; c < n / kChunk; c += G) f(c * kChunk, Vec{});
  } else {
    for (int64_t k = t; k < n; k += G) f(k, One{});
  }
}

// An operand whose dtype is known only at run time (weights: read once per chunk, from cache).
struct AnyPtr {
  const void *p;
  int dt;
  __device__ __forceinline__ float get(int64_t k) const {
    switch (dt) {
    case ENG_F64: return (float)static_cast<const double *>(p)[k];
    case ENG_F32: return static_cast<const float *>(p)[k];
    case ENG_F16: return load(static_cast<const __half *>(p) + k);
    default: return load(static_cast<const __nv_bfloat16 *>(p) + k);
    }
  }
  __device__ __forceinline__ double get_f64(int64_t k) const {
    return dt == ENG_F64 ? static_cast<const double *>(p)[k] : (double)get(k);
  }
  // The value in A (an absent operand is 1: a missing weight).
  template <typename A> __device__ __forceinline__ A at(int64_t k) const {
    if (!p) return A(1);
    if constexpr (std::is_same_v<A, double>) return get_f64(k);
    else return get(k);
  }
};

// Block-wide sums of K values at once (one barrier), given to every thread in warp order (the
// same order every time: reproducible). Consecutive calls must alternate between two `slots`
// buffers: warps that run ahead into the next reduction would otherwise overwrite values not yet
// read.
template <int K, typename A> __device__ __forceinline__ void block_sums(A (&v)[K], A (*slots)[32]) {
#pragma unroll
  for (int i = 0; i < K; i++)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v[i] += __shfl_xor_sync(0xffffffffu, v[i], o);
  const int nw = (int)(blockDim.x + 31) >> 5;
  if (nw == 1) return;
  if ((threadIdx.x & 31) == 0)
#pragma unroll
    for (int i = 0; i < K; i++) slots[i][threadIdx.x >> 5] = v[i];
  __syncthreads();
#pragma unroll
  for (int i = 0; i < K; i++) {
    v[i] = slots[i][0];
    for (int w = 1; w < nw; w++) v[i] += slots[i][w];
  }
}

// Threads for rows of n elements: a warp per 8-element chunk (or element), up to 1024.
inline unsigned row_threads(int64_t n, bool vec) {
  const int64_t units = vec ? n / kChunk : n;
  const int64_t t = (units + 31) / 32 * 32;
  return (unsigned)(t < 32 ? 32 : t > 1024 ? 1024 : t);
}

}  // namespace chunks
}  // namespace eng_kc
