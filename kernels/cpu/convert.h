/* Scalar dtype conversions for the CPU kernels, inline so that copy/fill loops stay fast.
 * engine/src/core/dtype.c exposes them as the eng_f32_to_bf16 ... functions of eng_base.h.
 *
 * Rounding: to nearest, ties to even, done once from the exact source value; overflow gives
 * +-Inf; f16/bf16 subnormals are exact; NaN stays a quiet NaN with its sign (and the top bits of
 * its payload). Integer stores truncate toward zero, saturate, and map NaN to 0. */
#ifndef ENG_KCPU_CONVERT_H
#define ENG_KCPU_CONVERT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "eng_base.h"

static inline size_t eng_k_size(eng_dtype_t dt) {
  return dt == ENG_U8 ? 1 : dt == ENG_F16 || dt == ENG_BF16 ? 2 : dt == ENG_F32 || dt == ENG_I32 ? 4 : 8;
}

static inline uint64_t eng_k_bits64(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static inline uint32_t eng_k_bits32(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static inline float eng_k_float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Rounds a double into a 16-bit binary format with `ebits` exponent and `mbits` mantissa bits
 * (f16: 5/10, bf16: 8/7), straight from the double's bits so that rounding happens only once. */
static inline uint16_t eng_k_f64_to_small(double x, int ebits, int mbits) {
  uint64_t b = eng_k_bits64(x);
  uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
  int ea = (int)((b >> 52) & 0x7FF);
  uint64_t mant = b & ((1ull << 52) - 1);
  uint16_t expmask = (uint16_t)(((1u << ebits) - 1) << mbits);
  if (ea == 0x7FF) {
    if (mant == 0) return sign | expmask; /* Inf */
    /* NaN: quiet bit set, top payload bits kept */
    return (uint16_t)(sign | expmask | (1u << (mbits - 1)) | (uint16_t)(mant >> (52 - mbits)));
  }
  /* Double subnormals (< 2^-1022) are far below half the smallest f16/bf16 subnormal. */
  if (ea == 0) return sign;
  int bias = (1 << (ebits - 1)) - 1;
  int e = ea - 1023, emin = 1 - bias;
  if (e > bias) return sign | expmask; /* beyond the largest finite exponent */
  int te = e < emin ? emin : e;        /* target exponent: subnormals share emin */
  uint64_t sig = mant | (1ull << 52);  /* x = sig * 2^(e-52) */
  int shift = te - e + 52 - mbits;     /* sig >> shift counts units of the target quantum */
  if (shift > 63) return sign;
  uint64_t r = sig >> shift, rem = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (r & 1))) r++;
  /* A carry out of the mantissa moves into the exponent field, up to Inf: that is the encoding. */
  return (uint16_t)(sign | (((uint64_t)(te + bias - 1) << mbits) + r));
}

static inline uint16_t eng_k_f32_to_bf16(float x) {
  uint32_t u = eng_k_bits32(x);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)((u >> 16) | 0x0040); /* quiet NaN */
  return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

static inline float eng_k_bf16_to_f32(uint16_t h) { return eng_k_float_of((uint32_t)h << 16); }

static inline uint16_t eng_k_f32_to_f16(float x) { return eng_k_f64_to_small((double)x, 5, 10); }

static inline float eng_k_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
  if (e == 0) {
    float v = (float)m * 0x1p-24f; /* subnormal (or zero): exact */
    return sign ? -v : v;
  }
  if (e == 31) return eng_k_float_of(sign | 0x7F800000 | (m << 13));
  return eng_k_float_of(sign | ((e + 112) << 23) | (m << 13));
}

/* double -> integer: truncate toward zero, saturate, NaN -> 0. */
static inline int64_t eng_k_sat_i64(double v) {
  if (v != v) return 0;
  if (v >= 0x1p63) return INT64_MAX;
  if (v < -0x1p63) return INT64_MIN;
  return (int64_t)v;
}

static inline int32_t eng_k_sat_i32(double v) {
  if (v != v) return 0;
  if (v >= 2147483647.0) return INT32_MAX;
  if (v <= -2147483648.0) return INT32_MIN;
  return (int32_t)v;
}

static inline uint8_t eng_k_sat_u8(double v) {
  if (v != v || v <= 0) return 0;
  if (v >= 255.0) return 255;
  return (uint8_t)v;
}

static inline double eng_k_load(const void *p, eng_dtype_t dt, int64_t i) {
  switch (dt) {
  case ENG_F64: return ((const double *)p)[i];
  case ENG_F32: return ((const float *)p)[i];
  case ENG_F16: return eng_k_f16_to_f32(((const uint16_t *)p)[i]);
  case ENG_BF16: return eng_k_bf16_to_f32(((const uint16_t *)p)[i]);
  case ENG_I32: return ((const int32_t *)p)[i];
  case ENG_I64: return (double)((const int64_t *)p)[i];
  case ENG_U8: return ((const uint8_t *)p)[i];
  default: return 0;
  }
}

static inline void eng_k_store(void *p, eng_dtype_t dt, int64_t i, double v) {
  switch (dt) {
  case ENG_F64: ((double *)p)[i] = v; break;
  case ENG_F32: ((float *)p)[i] = (float)v; break;
  case ENG_F16: ((uint16_t *)p)[i] = eng_k_f64_to_small(v, 5, 10); break;
  case ENG_BF16: ((uint16_t *)p)[i] = eng_k_f64_to_small(v, 8, 7); break;
  case ENG_I32: ((int32_t *)p)[i] = eng_k_sat_i32(v); break;
  case ENG_I64: ((int64_t *)p)[i] = eng_k_sat_i64(v); break;
  case ENG_U8: ((uint8_t *)p)[i] = eng_k_sat_u8(v); break;
  default: break;
  }
}

#endif
