/* dtypes: sizes, names, parsing, promotion, and scalar conversions. */
#include <string.h>

#include "cpu/convert.h"
#include "eng_base.h"

static const size_t sizes[ENG_DTYPE_COUNT] = {8, 4, 2, 2, 4, 8, 1};
static const char *const names[ENG_DTYPE_COUNT] = {"f64", "f32", "f16", "bf16", "i32", "i64", "u8"};

static int valid(eng_dtype_t dt) { return (int)dt >= 0 && dt < ENG_DTYPE_COUNT; }

size_t eng_dtype_size(eng_dtype_t dt) { return valid(dt) ? sizes[dt] : 0; }

const char *eng_dtype_name(eng_dtype_t dt) { return valid(dt) ? names[dt] : "invalid"; }

static const struct {
  const char *name;
  eng_dtype_t dt;
} aliases[] = {
    {"float64", ENG_F64}, {"double", ENG_F64},  {"float32", ENG_F32}, {"float", ENG_F32},
    {"float16", ENG_F16}, {"half", ENG_F16},    {"bfloat16", ENG_BF16}, {"int32", ENG_I32},
    {"int", ENG_I32},     {"int64", ENG_I64},   {"long", ENG_I64},    {"uint8", ENG_U8},
    {"byte", ENG_U8},     {"bool", ENG_U8},
};

eng_status_t eng_dtype_parse(const char *name, eng_dtype_t *out) {
  if (!name) return eng_error(ENG_ERR_DTYPE, "dtype: no dtype name given");
  for (int i = 0; i < ENG_DTYPE_COUNT; i++) {
    if (strcmp(name, names[i]) == 0) {
      *out = (eng_dtype_t)i;
      return ENG_OK;
    }
  }
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
    if (strcmp(name, aliases[i].name) == 0) {
      *out = aliases[i].dt;
      return ENG_OK;
    }
  }
  return eng_error(ENG_ERR_DTYPE, "dtype: unknown dtype '%s' (expected f64, f32, f16, bf16, i32, i64 or u8)",
                   name);
}

int eng_dtype_is_float(eng_dtype_t dt) {
  return dt == ENG_F64 || dt == ENG_F32 || dt == ENG_F16 || dt == ENG_BF16;
}

/* Rank within each kind; the higher rank wins. */
static int float_rank(eng_dtype_t dt) { return dt == ENG_F64 ? 3 : dt == ENG_F32 ? 2 : 1; }
static int int_rank(eng_dtype_t dt) { return dt == ENG_I64 ? 3 : dt == ENG_I32 ? 2 : 1; }

eng_dtype_t eng_dtype_promote(eng_dtype_t a, eng_dtype_t b) {
  if (a == b) return a;
  int fa = eng_dtype_is_float(a), fb = eng_dtype_is_float(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa) {
    int ra = float_rank(a), rb = float_rank(b);
    if (ra == 1 && rb == 1) return ENG_F32; /* f16 with bf16: neither holds the other */
    return ra >= rb ? a : b;
  }
  return int_rank(a) >= int_rank(b) ? a : b;
}

uint16_t eng_f32_to_bf16(float x) { return eng_k_f32_to_bf16(x); }
float eng_bf16_to_f32(uint16_t h) { return eng_k_bf16_to_f32(h); }
uint16_t eng_f32_to_f16(float x) { return eng_k_f32_to_f16(x); }
float eng_f16_to_f32(uint16_t h) { return eng_k_f16_to_f32(h); }
uint16_t eng_f64_to_bf16(double x) { return eng_k_f64_to_small(x, 8, 7); }
uint16_t eng_f64_to_f16(double x) { return eng_k_f64_to_small(x, 5, 10); }

double eng_load_f64(const void *p, eng_dtype_t dt, int64_t i) { return eng_k_load(p, dt, i); }
void eng_store_f64(void *p, eng_dtype_t dt, int64_t i, double v) { eng_k_store(p, dt, i, v); }
