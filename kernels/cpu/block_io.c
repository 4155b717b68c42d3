/* Block conversions for the row kernels; the switch on dtype sits outside each loop. */
#include "cpu/block_io.h"

#include "cpu/convert.h"

#define GATHER(T, EXPR)                                              \
  do {                                                               \
    const T *s_ = (const T *)x + start;                              \
    if (stride == 1)                                                 \
      for (int64_t k = 0; k < m; k++) dst[k] = EXPR(s_[k]);          \
    else                                                             \
      for (int64_t k = 0; k < m; k++) dst[k] = EXPR(s_[k * stride]); \
  } while (0)

#define AS_IS(v) (v)

void eng_kcpu_load_f64(double *dst, const void *x, eng_dtype_t dt, int64_t start, int64_t stride,
                       int64_t m) {
  switch (dt) {
  case ENG_F64: GATHER(double, AS_IS); break;
  case ENG_F32: GATHER(float, (double)); break;
  case ENG_F16: GATHER(uint16_t, (double)eng_k_f16_to_f32); break;
  case ENG_BF16: GATHER(uint16_t, (double)eng_k_bf16_to_f32); break;
  case ENG_I32: GATHER(int32_t, (double)); break;
  case ENG_I64: GATHER(int64_t, (double)); break;
  case ENG_U8: GATHER(uint8_t, (double)); break;
  default: break;
  }
}

void eng_kcpu_load_i64(int64_t *dst, const void *x, eng_dtype_t dt, int64_t start, int64_t stride,
                       int64_t m) {
  switch (dt) {
  case ENG_I32: GATHER(int32_t, (int64_t)); break;
  case ENG_I64: GATHER(int64_t, AS_IS); break;
  case ENG_U8: GATHER(uint8_t, (int64_t)); break;
  default: break;
  }
}

#define SCATTER(T, EXPR)                                             \
  do {                                                               \
    T *d_ = (T *)y + start;                                          \
    if (stride == 1)                                                 \
      for (int64_t k = 0; k < m; k++) d_[k] = EXPR(src[k]);          \
    else                                                             \
      for (int64_t k = 0; k < m; k++) d_[k * stride] = EXPR(src[k]); \
  } while (0)

static inline uint16_t to_f16(double v) { return eng_k_f64_to_small(v, 5, 10); }
static inline uint16_t to_bf16(double v) { return eng_k_f64_to_small(v, 8, 7); }

void eng_kcpu_store_f64(void *y, eng_dtype_t dt, int64_t start, int64_t stride, const double *src,
                        int64_t m) {
  switch (dt) {
  case ENG_F64: SCATTER(double, AS_IS); break;
  case ENG_F32: SCATTER(float, (float)); break;
  case ENG_F16: SCATTER(uint16_t, to_f16); break;
  case ENG_BF16: SCATTER(uint16_t, to_bf16); break;
  default: break;
  }
}

#define NARROW(T)                                      \
  do {                                                 \
    T *d_ = (T *)y + start;                            \
    for (int64_t k = 0; k < m; k++) d_[k] = (T)src[k]; \
  } while (0)

void eng_kcpu_store_i64(void *y, eng_dtype_t dt, int64_t start, const int64_t *src, int64_t m) {
  switch (dt) {
  case ENG_I32: NARROW(int32_t); break;
  case ENG_I64: NARROW(int64_t); break;
  case ENG_U8: NARROW(uint8_t); break;
  default: break;
  }
}
