#include "cpu/copy.h"

#include <string.h>

#include "cpu/convert.h"
#include "cpu/nd_iter.h"

typedef double T_f64;
typedef float T_f32;
typedef uint16_t T_f16;
typedef uint16_t T_bf16;
typedef int32_t T_i32;
typedef int64_t T_i64;
typedef uint8_t T_u8;

#define LD_f64(x) (x)
#define LD_f32(x) ((double)(x))
#define LD_f16(x) ((double)eng_k_f16_to_f32(x))
#define LD_bf16(x) ((double)eng_k_bf16_to_f32(x))
#define LD_i32(x) ((double)(x))
#define LD_i64(x) ((double)(x))
#define LD_u8(x) ((double)(x))

#define ST_f64(v) (v)
#define ST_f32(v) ((float)(v))
#define ST_f16(v) eng_k_f64_to_small(v, 5, 10)
#define ST_bf16(v) eng_k_f64_to_small(v, 8, 7)
#define ST_i32(v) eng_k_sat_i32(v)
#define ST_i64(v) eng_k_sat_i64(v)
#define ST_u8(v) eng_k_sat_u8(v)

typedef void (*row_fn)(void *d, int64_t ds, const void *s, int64_t ss, int64_t n);

#define ROW(D, S)                                                                     \
  static void row_##D##_##S(void *dp, int64_t ds, const void *sp, int64_t ss, int64_t n) { \
    T_##D *d = dp;                                                                    \
    const T_##S *s = sp;                                                              \
    for (int64_t i = 0; i < n; i++) d[i * ds] = ST_##D(LD_##S(s[i * ss]));            \
  }

/* Same dtype: move the bits (keeps NaN payloads and i64 values exactly). */
#define RAW(T, name)                                                                  \
  static void name(void *dp, int64_t ds, const void *sp, int64_t ss, int64_t n) {     \
    T *d = dp;                                                                        \
    const T *s = sp;                                                                  \
    if (ds == 1 && ss == 1)                                                           \
      memcpy(d, s, (size_t)n * sizeof(T));                                            \
    else                                                                              \
      for (int64_t i = 0; i < n; i++) d[i * ds] = s[i * ss];                          \
  }

RAW(uint64_t, raw64)
RAW(uint32_t, raw32)
RAW(uint16_t, raw16)
RAW(uint8_t, raw8)

#define ROWS_INTO(D, a, b, c, d, e, f) ROW(D, a) ROW(D, b) ROW(D, c) ROW(D, d) ROW(D, e) ROW(D, f)
ROWS_INTO(f64, f32, f16, bf16, i32, i64, u8)
ROWS_INTO(f32, f64, f16, bf16, i32, i64, u8)
ROWS_INTO(f16, f64, f32, bf16, i32, i64, u8)
ROWS_INTO(bf16, f64, f32, f16, i32, i64, u8)
ROWS_INTO(i32, f64, f32, f16, bf16, i64, u8)
ROWS_INTO(i64, f64, f32, f16, bf16, i32, u8)
ROWS_INTO(u8, f64, f32, f16, bf16, i32, i64)

/* rows[dst dtype][src dtype], in eng_dtype_t order f64 f32 f16 bf16 i32 i64 u8 */
static const row_fn rows[ENG_DTYPE_COUNT][ENG_DTYPE_COUNT] = {
    {raw64, row_f64_f32, row_f64_f16, row_f64_bf16, row_f64_i32, row_f64_i64, row_f64_u8},
    {row_f32_f64, raw32, row_f32_f16, row_f32_bf16, row_f32_i32, row_f32_i64, row_f32_u8},
    {row_f16_f64, row_f16_f32, raw16, row_f16_bf16, row_f16_i32, row_f16_i64, row_f16_u8},
    {row_bf16_f64, row_bf16_f32, row_bf16_f16, raw16, row_bf16_i32, row_bf16_i64, row_bf16_u8},
    {row_i32_f64, row_i32_f32, row_i32_f16, row_i32_bf16, raw32, row_i32_i64, row_i32_u8},
    {row_i64_f64, row_i64_f32, row_i64_f16, row_i64_bf16, row_i64_i32, raw64, row_i64_u8},
    {row_u8_f64, row_u8_f32, row_u8_f16, row_u8_bf16, row_u8_i32, row_u8_i64, raw8},
};

static void copy_run(void *ctx, int64_t n, char *const *p, const int64_t *s) {
  row_fn fn = *(const row_fn *)ctx;
  fn(p[0], s[0], p[1], s[1], n);
}

void eng_kcpu_copy(void *dst, eng_dtype_t dst_dt, const int64_t *dst_stride, const void *src,
                   eng_dtype_t src_dt, const int64_t *src_stride, const int64_t *shape, int ndim) {
  eng_kcpu_nd_t it;
  eng_kcpu_nd_init(&it, ndim, shape, 2);
  eng_kcpu_nd_operand(&it, 0, dst, eng_k_size(dst_dt), dst_stride);
  eng_kcpu_nd_operand(&it, 1, (void *)src, eng_k_size(src_dt), src_stride);
  row_fn fn = rows[dst_dt][src_dt];
  eng_kcpu_nd_run(&it, copy_run, &fn);
}
