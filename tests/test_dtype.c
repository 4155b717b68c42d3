/* dtypes: sizes, names, parsing, promotion, and the f16/bf16 rounding bit patterns. */
#include <math.h>
#include <string.h>

#include "support.h"

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float f32_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static const char *const NAMES[ENG_DTYPE_COUNT] = {"f64", "f32", "f16", "bf16", "i32", "i64", "u8"};

Test(dtype, sizes_names_and_kinds) {
  const size_t sizes[ENG_DTYPE_COUNT] = {8, 4, 2, 2, 4, 8, 1};
  const int is_float[ENG_DTYPE_COUNT] = {1, 1, 1, 1, 0, 0, 0};
  for (int d = 0; d < ENG_DTYPE_COUNT; d++) {
    cr_assert_eq(eng_dtype_size((eng_dtype_t)d), sizes[d]);
    cr_assert_str_eq(eng_dtype_name((eng_dtype_t)d), NAMES[d]);
    cr_assert_eq(!!eng_dtype_is_float((eng_dtype_t)d), is_float[d]);
  }
}

Test(dtype, parse_names_and_aliases) {
  const struct {
    const char *s;
    eng_dtype_t dt;
  } cases[] = {{"f64", ENG_F64},     {"float64", ENG_F64}, {"double", ENG_F64}, {"f32", ENG_F32},
               {"float32", ENG_F32}, {"float", ENG_F32},   {"f16", ENG_F16},    {"float16", ENG_F16},
               {"half", ENG_F16},    {"bf16", ENG_BF16},   {"bfloat16", ENG_BF16}, {"i32", ENG_I32},
               {"int32", ENG_I32},   {"int", ENG_I32},     {"i64", ENG_I64},    {"int64", ENG_I64},
               {"long", ENG_I64},    {"u8", ENG_U8},       {"uint8", ENG_U8},   {"byte", ENG_U8},
               {"bool", ENG_U8}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    eng_dtype_t dt = ENG_DTYPE_COUNT;
    T_OK(eng_dtype_parse(cases[i].s, &dt));
    cr_assert_eq(dt, cases[i].dt, "%s", cases[i].s);
  }
}

Test(dtype, parse_errors_name_the_string) {
  eng_dtype_t dt;
  T_FAILS(eng_dtype_parse("f33", &dt), ENG_ERR_DTYPE, "unknown dtype 'f33'");
  T_FAILS(eng_dtype_parse("F32", &dt), ENG_ERR_DTYPE, "'F32'");
  T_FAILS(eng_dtype_parse("", &dt), ENG_ERR_DTYPE, "unknown dtype ''");
  T_FAILS(eng_dtype_parse(NULL, &dt), ENG_ERR_DTYPE, "no dtype name");
}

Test(dtype, promotion_table) {
  /* rows/cols in enum order: f64 f32 f16 bf16 i32 i64 u8 */
  enum { D = ENG_F64, F = ENG_F32, H = ENG_F16, B = ENG_BF16, I = ENG_I32, L = ENG_I64, U = ENG_U8 };
  const int want[7][7] = {
      {D, D, D, D, D, D, D}, {D, F, F, F, F, F, F}, {D, F, H, F, H, H, H}, {D, F, F, B, B, B, B},
      {D, F, H, B, I, L, I}, {D, F, H, B, L, L, L}, {D, F, H, B, I, L, U},
  };
  for (int a = 0; a < 7; a++)
    for (int b = 0; b < 7; b++)
      cr_assert_eq(eng_dtype_promote((eng_dtype_t)a, (eng_dtype_t)b), want[a][b], "%s with %s",
                   NAMES[a], NAMES[b]);
}

/* ---- bf16 ---- */

Test(bf16, rounds_to_nearest_even) {
  const uint32_t in[] = {0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0x80000000,
                         0x00000000, 0xC0490FDB, 0x7F7F7FFF, 0x7F7F8000};
  const uint16_t want[] = {0x3F80, 0x3F80, 0x3F82, 0x3F81, 0x3F80, 0x8000,
                           0x0000, 0xC049, 0x7F7F, 0x7F80};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
    cr_assert_eq(eng_f32_to_bf16(f32_of(in[i])), want[i], "0x%08x -> 0x%04x, want 0x%04x", in[i],
                 eng_f32_to_bf16(f32_of(in[i])), want[i]);
}

Test(bf16, inf_nan_overflow_subnormals) {
  cr_assert_eq(eng_f32_to_bf16(INFINITY), 0x7F80);
  cr_assert_eq(eng_f32_to_bf16(-INFINITY), 0xFF80);
  cr_assert_eq(eng_f32_to_bf16(f32_of(0x7F7FFFFF)), 0x7F80); /* FLT_MAX rounds up to Inf */
  cr_assert_eq(eng_f32_to_bf16(f32_of(0xFF7FFFFF)), 0xFF80);
  cr_assert_eq(eng_f32_to_bf16(f32_of(0x7FC00000)), 0x7FC0);
  cr_assert_eq(eng_f32_to_bf16(f32_of(0xFFC00000)), 0xFFC0);   /* sign kept */
  cr_assert_eq(eng_f32_to_bf16(f32_of(0x7F800001)), 0x7FC0);   /* signalling NaN -> quiet */
  cr_assert_eq(eng_f32_to_bf16(f32_of(0x7FFFFFFF)), 0x7FFF);   /* never rounds into Inf */
  cr_assert_eq(eng_f32_to_bf16(f32_of(0x00010000)), 0x0001);   /* smallest bf16 subnormal */
  cr_assert_eq(eng_f32_to_bf16(f32_of(0x00018000)), 0x0002);   /* tie, odd -> up */
  cr_assert_eq(eng_f32_to_bf16(f32_of(0x00008000)), 0x0000);   /* tie, even -> down */
  cr_assert_eq(eng_f32_to_bf16(f32_of(0x00000001)), 0x0000);
  cr_assert_eq(eng_f32_to_bf16(f32_of(0x80008001)), 0x8001);
}

Test(bf16, decode_and_round_trip_all_patterns) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f = eng_bf16_to_f32((uint16_t)h);
    cr_assert_eq(f32_bits(f), h << 16);
    if (isnan(f))
      cr_assert(isnan(eng_bf16_to_f32(eng_f32_to_bf16(f))));
    else
      cr_assert_eq(eng_f32_to_bf16(f), h, "0x%04x", h);
  }
}

/* The classic bf16 rounding (add 0x7FFF + lsb, keep the top half), written here as a reference. */
static uint16_t ref_bf16(uint32_t u) {
  if ((u & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

Test(bf16, random_patterns_match_reference_and_f64_path) {
  double r[4096];
  t_random(r, 4096, 11, 0, 4294967296.0);
  for (int i = 0; i < 4096; i++) {
    uint32_t u = (uint32_t)r[i];
    float f = f32_of(u);
    cr_assert_eq(eng_f32_to_bf16(f), ref_bf16(u), "0x%08x", u);
    if (!isnan(f)) cr_assert_eq(eng_f64_to_bf16((double)f), ref_bf16(u), "0x%08x via f64", u);
  }
}

/* ---- f16 ---- */

/* An f16 decoder written from the IEEE definition. */
static double ref_f16_value(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

Test(f16, decode_and_round_trip_all_patterns) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f = eng_f16_to_f32((uint16_t)h);
    double want = ref_f16_value((uint16_t)h);
    if (isnan(want)) {
      cr_assert(isnan(f), "0x%04x", h);
      cr_assert_eq(signbit(f) != 0, (h >> 15) != 0);
      cr_assert(isnan(eng_f16_to_f32(eng_f32_to_f16(f))));
      continue;
    }
    cr_assert_eq((double)f, want, "0x%04x: %a vs %a", h, f, want);
    cr_assert_eq(signbit(f) != 0, (h >> 15) != 0);
    cr_assert_eq(eng_f32_to_f16(f), h, "0x%04x", h);
    cr_assert_eq(eng_f64_to_f16((double)f), h, "0x%04x via f64", h);
  }
}

Test(f16, rounding_bit_patterns) {
  const struct {
    float x;
    uint16_t h;
  } cases[] = {
      {1.0f, 0x3C00},
      {-2.0f, 0xC000},
      {0.5f, 0x3800},
      {65504.0f, 0x7BFF},
      {65519.99609375f, 0x7BFF},          /* just below the overflow tie */
      {65520.0f, 0x7C00},                 /* tie with odd 0x7BFF -> Inf */
      {1e6f, 0x7C00},
      {-1e6f, 0xFC00},
      {1.0f + 0x1p-11f, 0x3C00},          /* tie, even stays */
      {1.0f + 3 * 0x1p-11f, 0x3C02},      /* tie, odd goes up */
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3C01},
      {0x1p-14f, 0x0400},                 /* smallest normal */
      {0x1p-24f, 0x0001},                 /* smallest subnormal */
      {1023 * 0x1p-24f, 0x03FF},          /* largest subnormal */
      {1023.5f * 0x1p-24f, 0x0400},       /* tie rounds up into the normals */
      {0x1p-25f, 0x0000},                 /* tie with 0 -> 0 */
      {0x1p-25f * 1.0000001f, 0x0001},
      {3 * 0x1p-25f, 0x0002},             /* tie between 1 and 2 subnormal units -> 2 */
      {-0x1p-24f, 0x8001},
      {-0.0f, 0x8000},
      {0x1p-30f, 0x0000},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_assert_eq(eng_f32_to_f16(cases[i].x), cases[i].h, "%a -> 0x%04x, want 0x%04x", cases[i].x,
                 eng_f32_to_f16(cases[i].x), cases[i].h);
  cr_assert_eq(eng_f32_to_f16(INFINITY), 0x7C00);
  cr_assert_eq(eng_f32_to_f16(-INFINITY), 0xFC00);
  cr_assert_eq(eng_f32_to_f16(f32_of(0x7FC00000)), 0x7E00);
  cr_assert_eq(eng_f32_to_f16(f32_of(0xFFC00000)), 0xFE00);
  cr_assert_eq(eng_f32_to_f16(f32_of(0x7F800001)), 0x7E00); /* signalling -> quiet */
}

#ifdef __FLT16_MANT_DIG__
/* The compiler's own _Float16 conversions are an independent reference. */
Test(f16, random_patterns_match_compiler_float16) {
  enum { N = 200000 };
  static double r[N];
  t_random(r, N, 5, 0, 4294967296.0);
  for (int i = 0; i < N; i++) {
    float f = f32_of((uint32_t)r[i]);
    if (isnan(f)) continue;
    _Float16 h = (_Float16)f;
    uint16_t want;
    memcpy(&want, &h, 2);
    cr_assert_eq(eng_f32_to_f16(f), want, "%a", f);
  }
  t_random(r, N, 6, -70000, 70000);
  for (int i = 0; i < N; i++) {
    double x = r[i] * (i % 3 == 0 ? 1e-9 : 1); /* also the subnormal range */
    _Float16 h = (_Float16)x;
    uint16_t want;
    memcpy(&want, &h, 2);
    cr_assert_eq(eng_f64_to_f16(x), want, "%a", x);
  }
}
#endif

/* ---- f64 -> f16/bf16 round once ---- */

Test(f64_narrow, rounds_once_not_through_f32) {
  /* 1 + 2^-11 + 2^-40: above the f16 tie, but the f32 rounding lands exactly on the tie. */
  double x = 1.0 + 0x1p-11 + 0x1p-40;
  cr_assert_eq(eng_f64_to_f16(x), 0x3C01);
  cr_assert_eq(eng_f32_to_f16((float)x), 0x3C00);
  double y = 1.0 + 0x1p-8 + 0x1p-40;
  cr_assert_eq(eng_f64_to_bf16(y), 0x3F81);
  cr_assert_eq(eng_f32_to_bf16((float)y), 0x3F80);
  double z = 0x1p-25 + 0x1p-60; /* subnormal range: just above the tie with 0 */
  cr_assert_eq(eng_f64_to_f16(z), 0x0001);
  cr_assert_eq(eng_f32_to_f16((float)z), 0x0000);
  cr_assert_eq(eng_f64_to_f16(-z), 0x8001);
}

Test(f64_narrow, specials_and_overflow) {
  cr_assert_eq(eng_f64_to_f16(65519.999), 0x7BFF);
  cr_assert_eq(eng_f64_to_f16(65520.0), 0x7C00);
  cr_assert_eq(eng_f64_to_f16(1e300), 0x7C00);
  cr_assert_eq(eng_f64_to_f16(-1e300), 0xFC00);
  cr_assert_eq(eng_f64_to_f16(1e-300), 0x0000);
  cr_assert_eq(eng_f64_to_f16(-1e-300), 0x8000);
  cr_assert_eq(eng_f64_to_f16(0x1p-1074), 0x0000);
  cr_assert_eq(eng_f64_to_f16(NAN), 0x7E00);
  cr_assert_eq(eng_f64_to_f16(-NAN), 0xFE00);
  cr_assert_eq(eng_f64_to_f16(-INFINITY), 0xFC00);
  cr_assert_eq(eng_f64_to_bf16(1e39), 0x7F80);
  cr_assert_eq(eng_f64_to_bf16(3.3895313892515355e38), 0x7F7F); /* bf16 max */
  cr_assert_eq(eng_f64_to_bf16(-1e39), 0xFF80);
  cr_assert_eq(eng_f64_to_bf16(NAN), 0x7FC0);
  cr_assert_eq(eng_f64_to_bf16(-NAN), 0xFFC0);
  cr_assert_eq(eng_f64_to_bf16(INFINITY), 0x7F80);
  cr_assert_eq(eng_f64_to_bf16(0x1p-133), 0x0001); /* smallest bf16 subnormal */
  cr_assert_eq(eng_f64_to_bf16(0x1p-134), 0x0000); /* tie with 0 */
  cr_assert_eq(eng_f64_to_bf16(0x1p-134 * 1.5), 0x0001);
  cr_assert_eq(eng_f64_to_bf16(1.0 / 3.0), 0x3EAB);
  cr_assert_eq(eng_f64_to_f16(1.0 / 3.0), 0x3555);
}

/* ---- load / store ---- */

Test(load_store, floats_round_like_the_scalar_conversions) {
  double v[64];
  t_random(v, 64, 3, -1000, 1000);
  for (int i = 0; i < 64; i++) {
    double d;
    float f;
    uint16_t h;
    eng_store_f64(&d, ENG_F64, 0, v[i]);
    cr_assert_eq(d, v[i]);
    cr_assert_eq(eng_load_f64(&d, ENG_F64, 0), v[i]);
    eng_store_f64(&f, ENG_F32, 0, v[i]);
    cr_assert_eq(f, (float)v[i]);
    cr_assert_eq(eng_load_f64(&f, ENG_F32, 0), (double)(float)v[i]);
    eng_store_f64(&h, ENG_F16, 0, v[i]);
    cr_assert_eq(h, eng_f64_to_f16(v[i]));
    cr_assert_eq(eng_load_f64(&h, ENG_F16, 0), (double)eng_f16_to_f32(h));
    eng_store_f64(&h, ENG_BF16, 0, v[i]);
    cr_assert_eq(h, eng_f64_to_bf16(v[i]));
    cr_assert_eq(eng_load_f64(&h, ENG_BF16, 0), (double)eng_bf16_to_f32(h));
  }
}

Test(load_store, integers_truncate_saturate_and_zero_nan) {
  const double in[] = {2.9, -2.9, 0.5, -0.5, 3e9, -3e9, 1e19, -1e19, NAN, INFINITY, -INFINITY, 300, 255.9, 41};
  const int32_t w32[] = {2, -2, 0, 0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 300, 255, 41};
  const int64_t w64[] = {2, -2, 0, 0, 3000000000LL, -3000000000LL, INT64_MAX, INT64_MIN, 0, INT64_MAX, INT64_MIN, 300, 255, 41};
  const uint8_t w8[] = {2, 0, 0, 0, 255, 0, 255, 0, 0, 255, 0, 255, 255, 41};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
    int32_t a[3] = {7, 7, 7};
    int64_t b[3] = {7, 7, 7};
    uint8_t c[3] = {7, 7, 7};
    eng_store_f64(a, ENG_I32, 1, in[i]);
    eng_store_f64(b, ENG_I64, 1, in[i]);
    eng_store_f64(c, ENG_U8, 1, in[i]);
    cr_assert_eq(a[1], w32[i], "i32 of %g: %d", in[i], a[1]);
    cr_assert_eq(b[1], w64[i], "i64 of %g: %lld", in[i], (long long)b[1]);
    cr_assert_eq(c[1], w8[i], "u8 of %g: %d", in[i], c[1]);
    cr_assert(a[0] == 7 && a[2] == 7 && b[0] == 7 && b[2] == 7 && c[0] == 7 && c[2] == 7);
    cr_assert_eq(eng_load_f64(a, ENG_I32, 1), (double)w32[i]);
    cr_assert_eq(eng_load_f64(b, ENG_I64, 1), (double)w64[i]);
    cr_assert_eq(eng_load_f64(c, ENG_U8, 1), (double)w8[i]);
  }
}
