// Device-side dtype conversions that give the bits of kernels/cpu/copy.c for every input, NaN
// payloads included: values go through double as the CPU copy does (load as double, store from
// double), and float<->double NaNs follow x86 (quiet bit set, payload kept), which is what the CPU
// reference compiles to. Storage types are raw: f16/bf16 are uint16_t bit patterns.
// Hot pairs (f32 <-> f16/bf16) have direct versions that give the same bits.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "eng_base.h"

namespace eng_kc {
namespace cvt {

template <int D> struct storage;
template <> struct storage<ENG_F64> { using type = double; };
template <> struct storage<ENG_F32> { using type = float; };
template <> struct storage<ENG_F16> { using type = uint16_t; };
template <> struct storage<ENG_BF16> { using type = uint16_t; };
template <> struct storage<ENG_I32> { using type = int32_t; };
template <> struct storage<ENG_I64> { using type = int64_t; };
template <> struct storage<ENG_U8> { using type = uint8_t; };
template <int D> using st_t = typename storage<D>::type;

__host__ __device__ inline size_t dtype_bytes(int dt) {
  return dt == ENG_U8 ? 1 : dt == ENG_F16 || dt == ENG_BF16 ? 2 : dt == ENG_F32 || dt == ENG_I32 ? 4 : 8;
}

// ---- float <-> double, NaNs as x86 converts them ----
__device__ __forceinline__ double f32_to_f64(float x) {
  if (x == x) return (double)x;
  uint64_t u = __float_as_uint(x);
  return __longlong_as_double((long long)(((u >> 31) << 63) | 0x7FF8000000000000ull |
                                          ((u & 0x7FFFFFull) << 29)));
}

__device__ __forceinline__ float f64_to_f32(double v) {
  if (v == v) return __double2float_rn(v);
  uint64_t u = (uint64_t)__double_as_longlong(v);
  return __uint_as_float((uint32_t)((u >> 63) << 31) | 0x7FC00000u |
                         (uint32_t)((u >> 29) & 0x7FFFFFull));
}

// ---- 16-bit floats ----
// eng_k_f64_to_small: round a double into 1/ebits/mbits once, straight from its bits.
__device__ __forceinline__ uint16_t f64_to_small(double x, int ebits, int mbits) {
  uint64_t b = (uint64_t)__double_as_longlong(x);
  uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
  int ea = (int)((b >> 52) & 0x7FF);
  uint64_t mant = b & ((1ull << 52) - 1);
  uint16_t expmask = (uint16_t)(((1u << ebits) - 1) << mbits);
  if (ea == 0x7FF) {
    if (mant == 0) return sign | expmask;
    return (uint16_t)(sign | expmask | (1u << (mbits - 1)) | (uint16_t)(mant >> (52 - mbits)));
  }
  if (ea == 0) return sign;
  int bias = (1 << (ebits - 1)) - 1;
  int e = ea - 1023, emin = 1 - bias;
  if (e > bias) return sign | expmask;
  int te = e < emin ? emin : e;
  uint64_t sig = mant | (1ull << 52);
  int shift = te - e + 52 - mbits;
  if (shift > 63) return sign;
  uint64_t r = sig >> shift, rem = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (r & 1))) r++;
  return (uint16_t)(sign | (((uint64_t)(te + bias - 1) << mbits) + r));
}

// eng_k_f16_to_f32: exact, NaN payload moved up unchanged.
__device__ __forceinline__ float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
  if (e == 0) {
    float v = __fmul_rn((float)m, 0x1p-24f);
    return sign ? -v : v;
  }
  if (e == 31) return __uint_as_float(sign | 0x7F800000u | (m << 13));
  return __uint_as_float(sign | ((e + 112) << 23) | (m << 13));
}

__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

// ---- integers: truncate toward zero, saturate, NaN -> 0 ----
__device__ __forceinline__ int64_t sat_i64(double v) {
  if (v != v) return 0;
  if (v >= 0x1p63) return INT64_MAX;
  if (v < -0x1p63) return INT64_MIN;
  return __double2ll_rz(v);
}
__device__ __forceinline__ int32_t sat_i32(double v) {
  if (v != v) return 0;
  if (v >= 2147483647.0) return INT32_MAX;
  if (v <= -2147483648.0) return INT32_MIN;
  return __double2int_rz(v);
}
__device__ __forceinline__ uint8_t sat_u8(double v) {
  if (v != v || v <= 0) return 0;
  if (v >= 255.0) return 255;
  return (uint8_t)__double2uint_rz(v);
}

// ---- load as double / store from double (LD_* and ST_* of kernels/cpu/copy.c) ----
template <int S> __device__ __forceinline__ double to_f64(st_t<S> x);
template <> __device__ __forceinline__ double to_f64<ENG_F64>(double x) { return x; }
template <> __device__ __forceinline__ double to_f64<ENG_F32>(float x) { return f32_to_f64(x); }
template <> __device__ __forceinline__ double to_f64<ENG_F16>(uint16_t x) { return f32_to_f64(f16_to_f32(x)); }
template <> __device__ __forceinline__ double to_f64<ENG_BF16>(uint16_t x) { return f32_to_f64(bf16_to_f32(x)); }
template <> __device__ __forceinline__ double to_f64<ENG_I32>(int32_t x) { return (double)x; }
template <> __device__ __forceinline__ double to_f64<ENG_I64>(int64_t x) { return __ll2double_rn(x); }
template <> __device__ __forceinline__ double to_f64<ENG_U8>(uint8_t x) { return (double)x; }

template <int D> __device__ __forceinline__ st_t<D> from_f64(double v);
template <> __device__ __forceinline__ double from_f64<ENG_F64>(double v) { return v; }
template <> __device__ __forceinline__ float from_f64<ENG_F32>(double v) { return f64_to_f32(v); }
template <> __device__ __forceinline__ uint16_t from_f64<ENG_F16>(double v) { return f64_to_small(v, 5, 10); }
template <> __device__ __forceinline__ uint16_t from_f64<ENG_BF16>(double v) { return f64_to_small(v, 8, 7); }
template <> __device__ __forceinline__ int32_t from_f64<ENG_I32>(double v) { return sat_i32(v); }
template <> __device__ __forceinline__ int64_t from_f64<ENG_I64>(double v) { return sat_i64(v); }
template <> __device__ __forceinline__ uint8_t from_f64<ENG_U8>(double v) { return sat_u8(v); }

// ---- one element from dtype S to dtype D, as the CPU copy converts it ----
template <int D, int S> struct convert {
  static __device__ __forceinline__ st_t<D> run(st_t<S> x) { return from_f64<D>(to_f64<S>(x)); }
};
// The hot pairs: the same bits without the trip through double. Narrowing rounds once to nearest
// even either way; NaNs take the general path.
template <> struct convert<ENG_F16, ENG_F32> {
  static __device__ __forceinline__ uint16_t run(float x) {
    if (x != x) return from_f64<ENG_F16>(f32_to_f64(x));
    return __half_as_ushort(__float2half_rn(x));
  }
};
template <> struct convert<ENG_BF16, ENG_F32> {
  static __device__ __forceinline__ uint16_t run(float x) {
    uint32_t u = __float_as_uint(x);
    if (x != x) return from_f64<ENG_BF16>(f32_to_f64(x));
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
};
// Widening to f32 is exact, signaling NaNs included: the CPU's (float)(double)x round trip is
// folded away by gcc (at every -O level), so it never quiets them.
template <> struct convert<ENG_F32, ENG_F16> {
  static __device__ __forceinline__ float run(uint16_t h) { return f16_to_f32(h); }
};
template <> struct convert<ENG_F32, ENG_BF16> {
  static __device__ __forceinline__ float run(uint16_t h) { return bf16_to_f32(h); }
};

// Runs BODY with the constant `NAME` bound to dtype `dt` (a template argument); other values
// return cudaErrorInvalidValue.
#define ENG_KC_DTYPE_CASES(NAME, dt, ...)                                              \
  switch (dt) {                                                                      \
  case ENG_F64: { constexpr int NAME = ENG_F64; __VA_ARGS__; } break;               \
  case ENG_F32: { constexpr int NAME = ENG_F32; __VA_ARGS__; } break;               \
  case ENG_F16: { constexpr int NAME = ENG_F16; __VA_ARGS__; } break;               \
  case ENG_BF16: { constexpr int NAME = ENG_BF16; __VA_ARGS__; } break;             \
  case ENG_I32: { constexpr int NAME = ENG_I32; __VA_ARGS__; } break;               \
  case ENG_I64: { constexpr int NAME = ENG_I64; __VA_ARGS__; } break;               \
  case ENG_U8: { constexpr int NAME = ENG_U8; __VA_ARGS__; } break;                 \
  default: return (int)cudaErrorInvalidValue;                                        \
  }

// The same for the floating dtypes only.
#define ENG_KC_FLOAT_DTYPE_CASES(NAME, dt, ...)                                        \
  switch (dt) {                                                                      \
  case ENG_F64: { constexpr int NAME = ENG_F64; __VA_ARGS__; } break;               \
  case ENG_F32: { constexpr int NAME = ENG_F32; __VA_ARGS__; } break;               \
  case ENG_F16: { constexpr int NAME = ENG_F16; __VA_ARGS__; } break;               \
  case ENG_BF16: { constexpr int NAME = ENG_BF16; __VA_ARGS__; } break;             \
  default: return (int)cudaErrorInvalidValue;                                        \
  }

}  // namespace cvt
}  // namespace eng_kc
