// Row kernels' shared pieces (softmax, layer/rms norm, cross-entropy): a group of threads (a
// warp, or the whole block) owns one contiguous row at a time; reductions over the group; loops
// over the group's share of a row with 16-byte loads when the row allows them.
#pragma once

#include <math.h>
#include <stdint.h>

#include "cuda/common.cuh"

namespace eng_kc {
namespace rows {

// Elements of T in a 16-byte vector.
template <typename T> constexpr int vec_of() { return 16 / (int)sizeof(T); }

inline bool aligned16(const void *p) { return (uintptr_t)p % 16 == 0; }

// Rows of n elements starting at p can be read in 16-byte vectors.
template <typename T> bool vec_rows(const void *p, int64_t n) {
  return p == nullptr || (aligned16(p) && n % vec_of<T>() == 0);
}

// WARP: each warp of the block owns a row; else the block owns one. Rows are visited with a
// stride, so any row count fits in the grid; every thread of a group sees the same rows.
template <bool WARP> struct Group {
  __device__ int rank() const { return WARP ? (int)(threadIdx.x & 31) : (int)threadIdx.x; }
  __device__ int size() const { return WARP ? 32 : (int)blockDim.x; }
  __device__ int64_t first() const {
    return WARP ? (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5) : (int64_t)blockIdx.x;
  }
  __device__ int64_t step() const {
    return WARP ? (int64_t)gridDim.x * (blockDim.x >> 5) : (int64_t)gridDim.x;
  }
};

// NaN-propagating max, as the CPU reference: a NaN is never replaced.
template <typename A> __device__ __forceinline__ A nanmax(A acc, A v) {
  return (v != v || v > acc) ? v : acc;
}

// Block-wide max (NaN wins); every thread gets the result. `scratch` holds 32 values (shared).
template <typename A> __device__ A block_max(A v, A *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int nw = (blockDim.x + 31) >> 5;
  v = (int)threadIdx.x < nw ? scratch[threadIdx.x] : -(A)INFINITY;
  if (warp == 0) v = warp_max(v);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  return scratch[0];
}

// Group-wide sum and max, given to every thread of the group. A warp group never touches
// `scratch` or synchronizes the block.
template <bool WARP, typename A> __device__ __forceinline__ A group_sum(A v, A *scratch) {
  if constexpr (WARP) return warp_sum(v);
  else return block_sum(v, scratch);
}
template <bool WARP, typename A> __device__ __forceinline__ A group_max(A v, A *scratch) {
  if constexpr (WARP) return warp_max(v);
  else return block_max(v, scratch);
}

// Group-wide reduction by op (commutative: both lanes of a shuffle pair get the same value), given
// to every thread of the group. A block takes one barrier: each warp reduces, lane 0 posts to
// slot[warp], and every thread folds the posted values in warp order. `slot` (32 shared values)
// may be overwritten by warps that run ahead into the block's next reduction, so consecutive
// reductions alternate between two slots: the barrier in between keeps them apart.
template <bool WARP, typename A, typename Op>
__device__ __forceinline__ A group_reduce(A v, A *slot, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if constexpr (!WARP) {
    if ((threadIdx.x & 31) == 0) slot[threadIdx.x >> 5] = v;
    __syncthreads();
    const int nw = (int)(blockDim.x + 31) >> 5;
    v = slot[0];
    for (int w = 1; w < nw; w++) v = op(v, slot[w]);
  }
  return v;
}

// f(k, value) for this thread's elements k of a row of n (thread t of G), in 16-byte vectors
// when `vec` (the row is aligned and n a multiple of the vector).
template <typename T, typename F>
__device__ __forceinline__ void for_row(const T *__restrict__ row, int64_t n, bool vec, int t, int G,
                                        F f) {
  constexpr int VEC = vec_of<T>();
  if (vec) {
    for (int64_t j = t; j < n / VEC; j += G) {
      alignas(16) T buf[VEC];
      *reinterpret_cast<int4 *>(buf) = *reinterpret_cast<const int4 *>(row + j * VEC);
#pragma unroll
      for (int e = 0; e < VEC; e++) f(j * VEC + e, load(&buf[e]));
    }
  } else {
    for (int64_t k = t; k < n; k += G) f(k, load(row + k));
  }
}

// out[k] = f(k, in[k]) for this thread's elements of a row, rounded once into T; the same vector
// rule as for_row (which must then hold for both rows).
template <typename T, typename F>
__device__ __forceinline__ void map_row(const T *__restrict__ in, T *__restrict__ out, int64_t n,
                                        bool vec, int t, int G, F f) {
  constexpr int VEC = vec_of<T>();
  if (vec) {
    for (int64_t j = t; j < n / VEC; j += G) {
      alignas(16) T buf[VEC];
      *reinterpret_cast<int4 *>(buf) = *reinterpret_cast<const int4 *>(in + j * VEC);
#pragma unroll
      for (int e = 0; e < VEC; e++) store(&buf[e], f(j * VEC + e, load(&buf[e])));
      *reinterpret_cast<int4 *>(out + j * VEC) = *reinterpret_cast<const int4 *>(buf);
    }
  } else {
    for (int64_t k = t; k < n; k += G) store(out + k, f(k, load(in + k)));
  }
}

}  // namespace rows
}  // namespace eng_kc
