/* The Philox RNG: Random123 known-answer vectors, the per-element formulas reproduced here from
 * the raw words, determinism and offsets, distribution statistics, and argument errors. */
#include <math.h>
#include <stdlib.h>

#include "../kernels/cpu/philox.h"
#include "eng_cuda.h"
#include "eng_registry.h"
#include "support.h"

static const eng_dtype_t FLOATS[4] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};

/* Random123's tests/kat_vectors, the three philox4x32 10 lines. */
Test(philox, random123_known_answers) {
  const uint32_t ctr[3][4] = {{0, 0, 0, 0},
                              {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                              {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}};
  const uint32_t key[3][2] = {{0, 0}, {0xffffffff, 0xffffffff}, {0xa4093822, 0x299f31d0}};
  const uint32_t want[3][4] = {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
                               {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
                               {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}};
  for (int k = 0; k < 3; k++) {
    uint32_t out[4];
    eng_philox4x32_10(ctr[k], key[k], out);
    for (int j = 0; j < 4; j++)
      cr_assert_eq(out[j], want[k][j], "vector %d word %d: 0x%08x, want 0x%08x", k, j, out[j], want[k][j]);
  }
}

Test(philox, engine_counter_and_key_layout) {
  uint32_t out[4], ref[4];
  eng_philox4x32(0, 0, out);
  cr_assert(out[0] == 0x6627e8d5 && out[1] == 0xe169c58d && out[2] == 0xbc57ac4c && out[3] == 0x9b00dbd8);
  const uint64_t seeds[3] = {1, 0x123456789abcdef0ull, ~0ull}, ctrs[3] = {7, 0xfedcba9876543210ull, 1ull << 32};
  for (int k = 0; k < 3; k++) {
    eng_philox4x32(seeds[k], ctrs[k], out);
    const uint32_t c[4] = {(uint32_t)ctrs[k], (uint32_t)(ctrs[k] >> 32), 0, 0};
    const uint32_t key[2] = {(uint32_t)seeds[k], (uint32_t)(seeds[k] >> 32)};
    eng_philox4x32_10(c, key, ref);
    for (int j = 0; j < 4; j++) cr_assert_eq(out[j], ref[j]);
  }
}

/* Word i%4 of block offset + i/4. */
static uint32_t word(uint64_t seed, uint64_t offset, int64_t i) {
  uint32_t w[4];
  eng_philox4x32(seed, offset + (uint64_t)(i / 4), w);
  return w[i % 4];
}

static double stored(eng_dtype_t dt, double v) {
  switch (dt) {
  case ENG_F32: return (double)(float)v;
  case ENG_F16: return eng_f16_to_f32(eng_f64_to_f16(v));
  case ENG_BF16: return eng_bf16_to_f32(eng_f64_to_bf16(v));
  default: return v;
  }
}

Test(rand, elements_follow_the_documented_formula) {
  int64_t shape[2] = {7, 33};
  for (int d = 0; d < 4; d++) {
    eng_rng_t g;
    eng_rng_seed(&g, 0xC0FFEE + (uint64_t)d);
    g.offset = 5; /* start mid-stream */
    eng_tensor_t *t;
    T_OK(eng_tensor_rand(&g, shape, 2, -2.0, 3.0, FLOATS[d], ENG_CPU_DEVICE, &t));
    cr_assert_eq(g.offset, 5 + (231 + 3) / 4);
    double *v = t_values(t);
    for (int64_t i = 0; i < 231; i++) {
      uint32_t w = word(0xC0FFEE + (uint64_t)d, 5, i);
      double u = FLOATS[d] == ENG_F64 ? w / 4294967296.0 : (double)(w >> 8) / 16777216.0;
      cr_assert_eq(v[i], stored(FLOATS[d], -2.0 + 5.0 * u), "%s [%lld]", eng_dtype_name(FLOATS[d]), (long long)i);
    }
    free(v);
    eng_tensor_release(t);
  }
}

Test(randn, elements_follow_the_documented_formula) {
  int64_t shape[1] = {37};
  for (int d = 0; d < 4; d++) {
    eng_rng_t g;
    eng_rng_seed(&g, 99);
    g.offset = 1000;
    eng_tensor_t *t;
    T_OK(eng_tensor_randn(&g, shape, 1, 0.5, 2.0, FLOATS[d], ENG_CPU_DEVICE, &t));
    cr_assert_eq(g.offset, 1010);
    double *v = t_values(t);
    for (int64_t i = 0; i < 37; i++) {
      int64_t pair = (i % 4) / 2;
      double u1 = (word(99, 1000, i - i % 4 + 2 * pair) + 1.0) / 4294967296.0;
      double u2 = word(99, 1000, i - i % 4 + 2 * pair + 1) / 4294967296.0;
      double r = sqrt(-2.0 * log(u1)), z = i % 2 == 0 ? r * cos(2 * M_PI * u2) : r * sin(2 * M_PI * u2);
      cr_assert_eq(v[i], stored(FLOATS[d], 0.5 + 2.0 * z), "%s [%lld]: %.17g vs %.17g", eng_dtype_name(FLOATS[d]),
                   (long long)i, v[i], stored(FLOATS[d], 0.5 + 2.0 * z));
    }
    free(v);
    eng_tensor_release(t);
  }
}

Test(randint, elements_follow_the_documented_formula) {
  int64_t shape[2] = {3, 11};
  const eng_dtype_t dts[5] = {ENG_I64, ENG_I32, ENG_U8, ENG_F32, ENG_F64};
  const int64_t lo[5] = {-4000000000LL, -7, 3, -100, 1LL << 50}, hi[5] = {290000000LL, 9, 250, 100, (1LL << 50) + 4294967296LL};
  for (int k = 0; k < 5; k++) {
    eng_rng_t g;
    eng_rng_seed(&g, 1234567);
    eng_tensor_t *t;
    T_OK(eng_tensor_randint(&g, shape, 2, lo[k], hi[k], dts[k], ENG_CPU_DEVICE, &t));
    cr_assert_eq(t->dtype, dts[k]);
    cr_assert_eq(g.offset, 9);
    double *v = t_values(t);
    uint64_t range = (uint64_t)(hi[k] - lo[k]);
    for (int64_t i = 0; i < 33; i++) {
      int64_t want = lo[k] + (int64_t)(((uint64_t)word(1234567, 0, i) * range) >> 32);
      cr_assert_eq(v[i], (double)want, "%s [%lld]", eng_dtype_name(dts[k]), (long long)i);
      cr_assert(v[i] >= (double)lo[k] && v[i] < (double)hi[k]);
    }
    free(v);
    eng_tensor_release(t);
  }
}

Test(rng, same_seed_same_numbers_and_offsets_advance) {
  int64_t n10[1] = {10}, n8[1] = {8}, n16[1] = {16};
  eng_rng_t a, b;
  eng_rng_seed(&a, 42);
  eng_rng_seed(&b, 42);
  cr_assert(a.seed == 42 && a.offset == 0);
  eng_tensor_t *x, *y, *z, *w;
  T_OK(eng_tensor_rand(&a, n10, 1, 0, 1, ENG_F32, ENG_CPU_DEVICE, &x));
  T_OK(eng_tensor_rand(&b, n10, 1, 0, 1, ENG_F32, ENG_CPU_DEVICE, &y));
  cr_assert_eq(a.offset, 3);
  double *vx = t_values(x), *vy = t_values(y);
  for (int i = 0; i < 10; i++) cr_assert_eq(vx[i], vy[i]);
  free(vy);
  T_OK(eng_tensor_rand(&a, n10, 1, 0, 1, ENG_F32, ENG_CPU_DEVICE, &z)); /* the next draw differs */
  double *vz = t_values(z);
  int same = 0;
  for (int i = 0; i < 10; i++) same += vx[i] == vz[i];
  cr_assert_lt(same, 3);
  free(vx);
  free(vz);
  eng_tensor_release(x);
  eng_tensor_release(y);
  eng_tensor_release(z);

  /* two draws of 8 continue exactly where one draw of 16 goes */
  eng_rng_seed(&a, 7);
  eng_rng_seed(&b, 7);
  T_OK(eng_tensor_randn(&a, n8, 1, 0, 1, ENG_F64, ENG_CPU_DEVICE, &x));
  T_OK(eng_tensor_randn(&a, n8, 1, 0, 1, ENG_F64, ENG_CPU_DEVICE, &y));
  T_OK(eng_tensor_randn(&b, n16, 1, 0, 1, ENG_F64, ENG_CPU_DEVICE, &w));
  cr_assert(a.offset == 4 && b.offset == 4);
  double *p = t_values(x), *q = t_values(y), *r = t_values(w);
  for (int i = 0; i < 8; i++) cr_assert(p[i] == r[i] && q[i] == r[8 + i]);
  free(p);
  free(q);
  free(r);
  eng_tensor_release(x);
  eng_tensor_release(y);
  eng_tensor_release(w);

  eng_rng_seed(&a, 43); /* another seed, another stream */
  eng_rng_seed(&b, 42);
  T_OK(eng_tensor_randint(&a, n16, 1, 0, 1 << 30, ENG_I64, ENG_CPU_DEVICE, &x));
  T_OK(eng_tensor_randint(&b, n16, 1, 0, 1 << 30, ENG_I64, ENG_CPU_DEVICE, &y));
  p = t_values(x);
  q = t_values(y);
  same = 0;
  for (int i = 0; i < 16; i++) same += p[i] == q[i];
  cr_assert_lt(same, 2);
  free(p);
  free(q);
  eng_tensor_release(x);
  eng_tensor_release(y);
}

Test(rand, uniform_mean_variance_and_range) {
  enum { N = 100000 };
  int64_t shape[1] = {N};
  for (int d = 0; d < 4; d++) {
    eng_rng_t g;
    eng_rng_seed(&g, 2024);
    eng_tensor_t *t;
    T_OK(eng_tensor_rand(&g, shape, 1, -2.0, 3.0, FLOATS[d], ENG_CPU_DEVICE, &t));
    double *v = t_values(t), s = 0, s2 = 0;
    for (int i = 0; i < N; i++) {
      cr_assert(v[i] >= -2.0 && v[i] <= 3.0 && (FLOATS[d] != ENG_F64 || v[i] < 3.0));
      s += v[i];
    }
    double mean = s / N;
    for (int i = 0; i < N; i++) s2 += (v[i] - mean) * (v[i] - mean);
    double var = s2 / (N - 1), want_var = 25.0 / 12.0;
    /* sigma of the mean: sqrt(var / N); of the variance: sqrt((mu4 - var^2) / N), mu4 = 5^4/80 */
    cr_assert(fabs(mean - 0.5) < 4 * sqrt(want_var / N), "%s mean %g", eng_dtype_name(FLOATS[d]), mean);
    cr_assert(fabs(var - want_var) < 4 * sqrt((625.0 / 80 - want_var * want_var) / N) + t_tol(FLOATS[d]),
              "%s var %g", eng_dtype_name(FLOATS[d]), var);
    free(v);
    eng_tensor_release(t);
  }
}

Test(randn, normal_mean_variance_and_one_sigma_fraction) {
  enum { N = 100000 };
  int64_t shape[2] = {100, 1000};
  for (int d = 0; d < 4; d++) {
    eng_rng_t g;
    eng_rng_seed(&g, 77);
    eng_tensor_t *t;
    T_OK(eng_tensor_randn(&g, shape, 2, 3.0, 2.0, FLOATS[d], ENG_CPU_DEVICE, &t));
    double *v = t_values(t), s = 0, s2 = 0;
    int inside = 0;
    for (int i = 0; i < N; i++) {
      cr_assert(isfinite(v[i]));
      s += v[i];
      inside += fabs(v[i] - 3.0) < 2.0;
    }
    double mean = s / N;
    for (int i = 0; i < N; i++) s2 += (v[i] - mean) * (v[i] - mean);
    double var = s2 / (N - 1), frac = (double)inside / N, p = 0.682689492137;
    cr_assert(fabs(mean - 3.0) < 4 * 2.0 / sqrt(N), "%s mean %g", eng_dtype_name(FLOATS[d]), mean);
    cr_assert(fabs(var - 4.0) < 4 * 4.0 * sqrt(2.0 / N) + 4.0 * t_tol(FLOATS[d]), "%s var %g", eng_dtype_name(FLOATS[d]), var);
    cr_assert(fabs(frac - p) < 4 * sqrt(p * (1 - p) / N) + t_tol(FLOATS[d]), "%s one-sigma fraction %g",
              eng_dtype_name(FLOATS[d]), frac);
    free(v);
    eng_tensor_release(t);
  }
}

Test(randint, range_and_rough_uniformity) {
  enum { N = 100000, K = 10 };
  int64_t shape[1] = {N};
  const eng_dtype_t dts[3] = {ENG_I64, ENG_I32, ENG_U8};
  for (int d = 0; d < 3; d++) {
    eng_rng_t g;
    eng_rng_seed(&g, 5 + (uint64_t)d);
    eng_tensor_t *t;
    int64_t lo = dts[d] == ENG_U8 ? 10 : -3;
    T_OK(eng_tensor_randint(&g, shape, 1, lo, lo + K, dts[d], ENG_CPU_DEVICE, &t));
    double *v = t_values(t);
    int count[K] = {0};
    for (int i = 0; i < N; i++) {
      cr_assert(v[i] == floor(v[i]) && v[i] >= lo && v[i] < lo + K, "%g", v[i]);
      count[(int)(v[i] - lo)]++;
    }
    double sigma = sqrt(N * 0.1 * 0.9);
    for (int k = 0; k < K; k++)
      cr_assert(fabs((double)count[k] - N / K) < 5 * sigma, "%s value %d seen %d times", eng_dtype_name(dts[d]), k, count[k]);
    free(v);
    eng_tensor_release(t);
  }
  /* the widest range: 2^32 values, the raw words themselves */
  eng_rng_t g;
  eng_rng_seed(&g, 3);
  eng_tensor_t *t;
  int64_t n5[1] = {5};
  T_OK(eng_tensor_randint(&g, n5, 1, 0, 1LL << 32, ENG_I64, ENG_CPU_DEVICE, &t));
  double *v = t_values(t);
  for (int i = 0; i < 5; i++) cr_assert_eq(v[i], (double)word(3, 0, i));
  free(v);
  eng_tensor_release(t);
}

Test(rng, argument_errors_leave_the_offset) {
  eng_rng_t g;
  eng_rng_seed(&g, 1);
  int64_t shape[1] = {4}, neg[1] = {-4}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  eng_tensor_t *t = NULL;
  T_FAILS(eng_tensor_rand(&g, shape, 1, 2, 1, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "rand: low 2 is above high 1");
  T_FAILS(eng_tensor_rand(&g, shape, 1, 0, 1, ENG_I32, ENG_CPU_DEVICE, &t), ENG_ERR_DTYPE,
          "rand: dtype i32 is not a floating dtype (use randint for integers)");
  T_FAILS(eng_tensor_rand(&g, shape, 1, 0, INFINITY, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "rand: parameters must be finite");
  T_FAILS(eng_tensor_randn(&g, shape, 1, 0, -1, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "randn: std must be >= 0, got -1");
  T_FAILS(eng_tensor_randn(&g, shape, 1, NAN, 1, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "randn: parameters must be finite");
  T_FAILS(eng_tensor_randn(&g, shape, 1, 0, 1, ENG_U8, ENG_CPU_DEVICE, &t), ENG_ERR_DTYPE, "randn: dtype u8 is not a floating dtype");
  T_FAILS(eng_tensor_randint(&g, shape, 1, 5, 5, ENG_I64, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "randint: high - low must be an integer in [1, 2^32]");
  T_FAILS(eng_tensor_randint(&g, shape, 1, 0, (1LL << 32) + 1, ENG_I64, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "[1, 2^32]");
  T_FAILS(eng_tensor_randint(&g, shape, 1, 0, 300, ENG_U8, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "randint: [0, 300) does not fit u8");
  T_FAILS(eng_tensor_randint(&g, shape, 1, -1, 10, ENG_U8, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "does not fit u8");
  T_FAILS(eng_tensor_randint(&g, shape, 1, 2147483647LL, 2147483649LL, ENG_I32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "does not fit i32");
  T_FAILS(eng_tensor_randint(&g, shape, 1, 1LL << 60, (1LL << 60) + 5, ENG_I64, ENG_CPU_DEVICE, &t), ENG_ERR_ARG,
          "randint: bounds beyond +-2^53 are not supported");
  T_FAILS(eng_tensor_rand(&g, neg, 1, 0, 1, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_SHAPE, "rand: negative size in shape [-4]");
  T_FAILS(eng_tensor_randn(&g, nine, 9, 0, 1, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_SHAPE, "randn: 9 dims requested");
  eng_device_t missing = {ENG_DEV_CUDA, eng_cuda_device_count()}; /* a GPU that is not there */
  T_FAILS(eng_tensor_rand(&g, shape, 1, 0, 1, ENG_F32, missing, &t), ENG_ERR_DEVICE, "cuda");
  cr_assert_null(t);
  cr_assert_eq(g.offset, 0, "failed draws use no blocks");
}

Test(rng, empty_and_scalar_draws) {
  eng_rng_t g;
  eng_rng_seed(&g, 8);
  int64_t empty[2] = {3, 0};
  eng_tensor_t *t;
  T_OK(eng_tensor_rand(&g, empty, 2, 0, 1, ENG_F32, ENG_CPU_DEVICE, &t));
  cr_assert(eng_tensor_numel(t) == 0 && g.offset == 0);
  eng_tensor_release(t);
  T_OK(eng_tensor_randn(&g, NULL, 0, 0, 1, ENG_F64, ENG_CPU_DEVICE, &t));
  cr_assert(t->ndim == 0 && g.offset == 1);
  double v;
  T_OK(eng_tensor_get(t, NULL, &v));
  uint32_t w[4];
  eng_philox4x32(8, 0, w);
  cr_assert_eq(v, sqrt(-2.0 * log((w[0] + 1.0) / 4294967296.0)) * cos(2 * M_PI * (w[1] / 4294967296.0)));
  eng_tensor_release(t);
}
