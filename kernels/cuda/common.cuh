// Shared device-side vocabulary of the CUDA kernels: dtype traits and dispatch, strided index
// arithmetic for up to 8 dims, warp/block reductions, launch helpers. Kernels keep bf16/f16 in
// memory and compute in f32 (f64 stays f64).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "eng_base.h"

namespace eng_kc {

// ---- n / d by multiply-high and shift, for 1 <= d and n below 2^31 (Granlund & Montgomery;
// PyTorch's IntDivider does the same): q = (umulhi(n, m) + n) >> s. A divider made on the host
// and passed to a kernel keeps a run-time division (~20 dependent instructions, 64-bit ones many
// more) off a per-step chain. ----
struct Div32 {
  uint32_t d, m, s;
};

inline Div32 make_div32(uint32_t d) {
  uint32_t s = 0;
  while (s < 32 && (uint64_t{1} << s) < d) s++;
  const uint64_t m = ((uint64_t{1} << 32) * ((uint64_t{1} << s) - d)) / d + 1;
  return Div32{d, (uint32_t)m, s};
}

__device__ __forceinline__ uint32_t div_by(const Div32 &v, uint32_t n) {
  return (__umulhi(n, v.m) + n) >> v.s;
}

// ---- dtypes ----
template <typename T> struct acc { using type = float; };
template <> struct acc<double> { using type = double; };
template <typename T> using acc_t = typename acc<T>::type;

template <typename T> __device__ __forceinline__ acc_t<T> load(const T *p) { return (acc_t<T>)*p; }
template <> __device__ __forceinline__ float load<__half>(const __half *p) { return __half2float(*p); }
template <> __device__ __forceinline__ float load<__nv_bfloat16>(const __nv_bfloat16 *p) {
  return __bfloat162float(*p);
}

// Round-to-nearest-even stores (the __float2half / __float2bfloat16 intrinsics are RNE and keep
// NaN/Inf), matching the CPU conversions.
template <typename T, typename A> __device__ __forceinline__ void store(T *p, A v) { *p = (T)v; }
template <> __device__ __forceinline__ void store<__half, float>(__half *p, float v) { *p = __float2half_rn(v); }
template <> __device__ __forceinline__ void store<__nv_bfloat16, float>(__nv_bfloat16 *p, float v) {
  *p = __float2bfloat16_rn(v);
}

// Runs BODY with `T` bound to the C++ type of a floating dtype; returns cudaErrorInvalidValue for
// other dtypes (the op's shape rule rejects them first).
#define ENG_KC_FLOAT_TYPES(dt, ...)                                                   \
  switch (dt) {                                                                      \
  case ENG_F64: { using T = double; __VA_ARGS__; } break;                           \
  case ENG_F32: { using T = float; __VA_ARGS__; } break;                            \
  case ENG_F16: { using T = __half; __VA_ARGS__; } break;                           \
  case ENG_BF16: { using T = __nv_bfloat16; __VA_ARGS__; } break;                   \
  default: return (int)cudaErrorInvalidValue;                                        \
  }

// Every dtype: floats as above, integers as themselves.
#define ENG_KC_ALL_TYPES(dt, ...)                                                     \
  switch (dt) {                                                                      \
  case ENG_F64: { using T = double; __VA_ARGS__; } break;                           \
  case ENG_F32: { using T = float; __VA_ARGS__; } break;                            \
  case ENG_F16: { using T = __half; __VA_ARGS__; } break;                           \
  case ENG_BF16: { using T = __nv_bfloat16; __VA_ARGS__; } break;                   \
  case ENG_I32: { using T = int32_t; __VA_ARGS__; } break;                          \
  case ENG_I64: { using T = int64_t; __VA_ARGS__; } break;                          \
  case ENG_U8: { using T = uint8_t; __VA_ARGS__; } break;                           \
  default: return (int)cudaErrorInvalidValue;                                        \
  }

// ---- strided addressing ----
// An operand's layout as seen by a kernel, passed by value. Dims are the output's dims (after
// broadcasting: stride 0 on expanded dims).
struct Layout {
  int ndim;
  int64_t shape[ENG_MAX_DIMS];
  int64_t stride[ENG_MAX_DIMS];
};

// The element offset of linear (row-major) index i of the output shape, under this layout.
__device__ __forceinline__ int64_t offset_of(const Layout &l, int64_t i) {
  int64_t off = 0;
  for (int d = l.ndim - 1; d >= 0; d--) {
    int64_t s = l.shape[d];
    off += (i % s) * l.stride[d];
    i /= s;
  }
  return off;
}

// ---- named barriers ----
// Barrier ID (1-15; __syncthreads is 0) of COUNT threads, counted by whole warps: bar_sync
// waits for the COUNT, bar_arrive counts itself and goes on (a producer's side).
template <int ID, int COUNT> __device__ __forceinline__ void bar_sync() {
  asm volatile("bar.sync %0, %1;" ::"n"(ID), "n"(COUNT) : "memory");
}
template <int ID, int COUNT> __device__ __forceinline__ void bar_arrive() {
  asm volatile("bar.arrive %0, %1;" ::"n"(ID), "n"(COUNT) : "memory");
}

// ---- reductions ----
// Over aligned groups of `width` lanes (a power of 2 up to 32; every lane of the warp takes part).
template <typename A> __device__ __forceinline__ A warp_sum(A v, int width = 32) {
  for (int o = width / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// v[j] = sum_u X[j][u] y[u]: a register block's 8 dot products, 8 independent chains.
__device__ __forceinline__ void block_dots(const float (&X)[8][8], const float (&y)[8],
                                           float (&v)[8]) {
#pragma unroll
  for (int j = 0; j < 8; j++) {
    float s = 0.f;
#pragma unroll
    for (int u = 0; u < 8; u++) s += X[j][u] * y[u];
    v[j] = s;
  }
}
// One level of a reduce-scatter over lanes `lanes` apart: of v[0, 2K) the lane keeps the half its
// bit (hi) selects, adds its partner's copy of that half, and leaves the sums in v[0, K). Levels
// K = M / 2, M / 4, .., 1 leave lane L the sum of entry L's bits (a transposed butterfly: M - 1
// shuffles for M sums over M lanes, where M warp_sums take M log2 M).
template <int K, int M> __device__ __forceinline__ void fold(float (&v)[M], bool hi, int lanes) {
  static_assert(2 * K <= M, "v holds 2K entries");
#pragma unroll
  for (int j = 0; j < K; j++) {
    const float send = hi ? v[j] : v[j + K], keep = hi ? v[j + K] : v[j];
    v[j] = keep + __shfl_xor_sync(0xffffffffu, send, lanes);
  }
}
template <typename A> __device__ __forceinline__ A warp_max(A v, int width = 32) {
  for (int o = width / 2; o > 0; o >>= 1) {
    A w = __shfl_xor_sync(0xffffffffu, v, o);
    v = (w > v || w != w) ? w : v;  // NaN wins, like the CPU reference
  }
  return v;
}
// The steps of a reduce-scatter from lane offset O down to 1 (O a power of 2 up to 16; every lane
// of the warp takes part): with NV > 1 values live in v, a step keeps the half that the lane's
// bit O names and adds the partner's copy of it; with one left, it adds the partner's. After
// them a lane holds v[0 .. max(NV / 2O, 1)) summed over its aligned group of 2O lanes: with
// NV <= 2O, value (lane % 2O) / (2O / NV), alike in 2O / NV lanes.
template <int NV, int O, int M>
__device__ __forceinline__ void scatter_halves(float (&v)[M], int lane) {
  static_assert(NV <= M, "NV live values of the M");
  if constexpr (O >= 1) {
    if constexpr (NV > 1) {
      constexpr int h = NV / 2;
      const bool hi = lane & O;
#pragma unroll
      for (int r = 0; r < h; r++) {
        const float keep = hi ? v[r + h] : v[r], send = hi ? v[r] : v[r + h];
        v[r] = keep + __shfl_xor_sync(0xffffffffu, send, O);
      }
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], O);
    }
    scatter_halves<(NV > 1 ? NV / 2 : 1), O / 2>(v, lane);
  }
}

// Block-wide sum; every thread gets the result. `scratch` holds 32 values (shared).
template <typename A> __device__ A block_sum(A v, A *scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  int nw = (blockDim.x + 31) >> 5;
  v = threadIdx.x < nw ? scratch[threadIdx.x] : (A)0;
  if (warp == 0) v = warp_sum(v);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  return scratch[0];
}

// ---- launch helpers ----
inline unsigned blocks_for(int64_t n, int threads, unsigned cap = 65535u * 16u) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return (unsigned)(b > (int64_t)cap ? cap : b);
}

}  // namespace eng_kc
