// Scalar vocabulary of the elementwise functors: the type each dtype computes in, widening and
// rounding, and the precise CUDA math functions under one name for float and double (the same
// functions, in the same precision, as the CPU reference's <tgmath.h> calls).
#pragma once

#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "cuda/common.cuh"

namespace eng_kc {
namespace ew {

// f16/bf16 compute in f32; every other dtype in itself (integers exactly).
template <typename T> struct compute { using type = T; };
template <> struct compute<__half> { using type = float; };
template <> struct compute<__nv_bfloat16> { using type = float; };
template <typename T> using compute_t = typename compute<T>::type;

template <typename T> __device__ __forceinline__ compute_t<T> widen(T x) { return x; }
template <> __device__ __forceinline__ float widen<__half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float widen<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

// Round to nearest even, once, keeping NaN and Inf (like the CPU conversions).
template <typename T> __device__ __forceinline__ T narrow(compute_t<T> v) { return v; }
template <> __device__ __forceinline__ __half narrow<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

#define ENG_EW_MATH1(NAME, F32, F64)                                                               \
  __device__ __forceinline__ float NAME(float x) { return F32(x); }                                \
  __device__ __forceinline__ double NAME(double x) { return F64(x); }

ENG_EW_MATH1(m_fabs, fabsf, fabs)
ENG_EW_MATH1(m_exp, expf, exp)
ENG_EW_MATH1(m_log, logf, log)
ENG_EW_MATH1(m_sqrt, sqrtf, sqrt)
ENG_EW_MATH1(m_tanh, tanhf, tanh)
ENG_EW_MATH1(m_erf, erff, erf)
ENG_EW_MATH1(m_log1p, log1pf, log1p)

#undef ENG_EW_MATH1

__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }

} // namespace ew
} // namespace eng_kc
