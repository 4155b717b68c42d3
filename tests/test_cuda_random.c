/* The creation ops on CUDA against the CPU, bit for bit. rand, randn and randint from the same seed
 * and Philox offset (every float dtype; randint every dtype), at sizes that are and are not
 * multiples of 4, from offsets whose blocks cross into the counter's high word, and as successive
 * draws of one generator; arange, linspace and eye for every dtype. Outputs are poisoned first.
 * f64 randn goes through CUDA's log/sin/cos, which may differ from glibc's in the last bits: it is
 * held to 1e-14 (relative to max(|x|, 1)) and the number of differing elements is logged; every other case must
 * match exactly. Skipped without a GPU. */
#include <criterion/logging.h>
#include <stdio.h>

#include "cuda_compare.h"
#include "eng_registry.h"
#include "ops/ops_internal.h"

static const eng_dtype_t FLOATS[4] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};
static const eng_dtype_t ALL[ENG_DTYPE_COUNT] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16,
                                                 ENG_I32, ENG_I64, ENG_U8};
static const int64_t SIZES[] = {1, 2, 3, 4, 5, 7, 1023, 4097, (1 << 20) + 3};
#define N_SIZES (sizeof SIZES / sizeof SIZES[0])
/* Seeds with both halves of the key in use; offsets at 0 and just below 2^32 blocks. */
static const uint64_t SEEDS[2] = {42, 0x123456789ABCDEF0ull};
static const uint64_t OFFSETS[2] = {0, 0xFFFFFFFEull};
#define CPU ENG_CPU_DEVICE

/* Runs creation op `id` into a poisoned output on dev (attrs as registry.c documents them). */
static eng_tensor_t *create(eng_op_id_t id, const int64_t *shape, int ndim, eng_dtype_t dt,
                            eng_device_t dev, const eng_op_attrs_t *attrs) {
  eng_tensor_t *out = poisoned(shape, ndim, dt, dev);
  eng_op_call_t call = {.id = id, .n_out = 1, .out = {out}, .attrs = *attrs};
  for (int d = 0; d < ndim; d++) call.attrs.i[d] = shape[d];
  call.attrs.ni = ndim;
  call.attrs.dtype = dt;
  call.attrs.device = dev;
  T_OK(eng_op_dispatch(&call));
  return out;
}

/* The op on the GPU and on the CPU, compared bit for bit. */
static void expect_op_matches(eng_op_id_t id, const int64_t *shape, int ndim, eng_dtype_t dt,
                              const eng_op_attrs_t *attrs, const char *what) {
  eng_tensor_t *g = create(id, shape, ndim, dt, GPU0, attrs), *c = create(id, shape, ndim, dt, CPU, attrs);
  expect_same_bits(g, c, what);
  eng_tensor_release(g);
  eng_tensor_release(c);
}

static eng_op_attrs_t random_attrs(double a, double b, uint64_t seed, uint64_t offset) {
  eng_op_attrs_t at = {.f = {a, b}, .u = {seed, offset}};
  return at;
}

Test(cuda_random, rand_matches_cpu_bit_for_bit) {
  SKIP_WITHOUT_GPU();
  char what[128];
  for (int d = 0; d < 4; d++)
    for (size_t k = 0; k < N_SIZES; k++)
      for (int s = 0; s < 2; s++) {
        eng_op_attrs_t at = random_attrs(-2.5, 7.0, SEEDS[s], OFFSETS[s]);
        snprintf(what, sizeof what, "rand n %lld, seed %llx, offset %llx", (long long)SIZES[k],
                 (unsigned long long)SEEDS[s], (unsigned long long)OFFSETS[s]);
        expect_op_matches(ENG_OP_RAND, &SIZES[k], 1, FLOATS[d], &at, what);
      }
  const int64_t shape[3] = {3, 5, 7};
  eng_op_attrs_t at = random_attrs(0, 1, 9, 3);
  for (int d = 0; d < 4; d++) expect_op_matches(ENG_OP_RAND, shape, 3, FLOATS[d], &at, "rand [3, 5, 7]");
}

Test(cuda_random, randint_matches_cpu_bit_for_bit) {
  SKIP_WITHOUT_GPU();
  /* Per dtype: a small range and the widest that fits (high - low up to 2^32). */
  static const double ranges[ENG_DTYPE_COUNT][2][2] = {
      [ENG_F64] = {{-5, 17}, {-9007199254740992.0, -9007199254740992.0 + 4294967296.0}},
      [ENG_F32] = {{-1000, 1000}, {0, 4294967296.0}},
      [ENG_F16] = {{-1000, 1000}, {-2147483648.0, 2147483648.0}},
      [ENG_BF16] = {{-1000, 1000}, {0, 4294967296.0}},
      [ENG_I32] = {{-3, 4}, {-2147483648.0, 2147483648.0}},
      [ENG_I64] = {{-5, 17}, {-9007199254740992.0, -9007199254740992.0 + 4294967296.0}},
      [ENG_U8] = {{3, 10}, {0, 256}},
  };
  char what[160];
  for (int d = 0; d < ENG_DTYPE_COUNT; d++)
    for (size_t k = 0; k < N_SIZES; k++)
      for (int r = 0; r < 2; r++) {
        const double *lh = ranges[ALL[d]][r];
        eng_op_attrs_t at = random_attrs(lh[0], lh[1], SEEDS[r], OFFSETS[r]);
        snprintf(what, sizeof what, "randint [%.17g, %.17g) n %lld", lh[0], lh[1], (long long)SIZES[k]);
        expect_op_matches(ENG_OP_RANDINT, &SIZES[k], 1, ALL[d], &at, what);
      }
}

/* randn: f32/f16/bf16 exact; f64 within 1e-14 of max(|x|, 1), with the differing count logged. */
Test(cuda_random, randn_matches_cpu) {
  SKIP_WITHOUT_GPU();
  char what[128];
  for (int d = 0; d < 4; d++)
    for (size_t k = 0; k < N_SIZES; k++)
      for (int s = 0; s < 2; s++) {
        eng_op_attrs_t at = random_attrs(0.5, 2.0, SEEDS[s], OFFSETS[s]);
        snprintf(what, sizeof what, "randn n %lld, seed %llx, offset %llx", (long long)SIZES[k],
                 (unsigned long long)SEEDS[s], (unsigned long long)OFFSETS[s]);
        if (FLOATS[d] != ENG_F64) {
          expect_op_matches(ENG_OP_RANDN, &SIZES[k], 1, FLOATS[d], &at, what);
          continue;
        }
        eng_tensor_t *g = create(ENG_OP_RANDN, &SIZES[k], 1, ENG_F64, GPU0, &at);
        eng_tensor_t *c = create(ENG_OP_RANDN, &SIZES[k], 1, ENG_F64, CPU, &at);
        double *gv = t_values(g), *cv = t_values(c), worst = 0;
        int64_t differ = 0;
        for (int64_t i = 0; i < SIZES[k]; i++) {
          cr_assert(isfinite(gv[i]), "%s: element %lld is %g", what, (long long)i, gv[i]);
          if (gv[i] == cv[i]) continue;
          differ++;
          double rel = fabs(gv[i] - cv[i]) / fmax(fabs(cv[i]), 1.0); /* an ulp of log/cos, scaled by O(1) */
          if (rel > worst) worst = rel;
        }
        if (differ)
          cr_log_info("%s: %lld of %lld f64 elements differ in the last bits (worst relative %.3g)",
                      what, (long long)differ, (long long)SIZES[k], worst);
        cr_assert(worst <= 1e-14, "%s: f64 difference %.3g", what, worst);
        free(gv), free(cv);
        eng_tensor_release(g), eng_tensor_release(c);
      }
}

/* Through the public API: one generator per device, seeded alike, drawing three times in a row;
 * the values and the offsets they leave must agree. */
Test(cuda_random, successive_draws_of_one_generator) {
  SKIP_WITHOUT_GPU();
  const int64_t shapes[3][2] = {{1, 7}, {33, 31}, {4097, 1}};
  for (int d = 0; d < 4; d++) {
    eng_rng_t gg, gc;
    eng_rng_seed(&gg, 1234 + (uint64_t)d);
    eng_rng_seed(&gc, 1234 + (uint64_t)d);
    for (int k = 0; k < 3; k++) {
      eng_tensor_t *g = NULL, *c = NULL;
      switch (k) {
      case 0:
        T_OK(eng_tensor_rand(&gg, shapes[k], 2, -1, 1, FLOATS[d], GPU0, &g));
        T_OK(eng_tensor_rand(&gc, shapes[k], 2, -1, 1, FLOATS[d], CPU, &c));
        break;
      case 1:
        T_OK(eng_tensor_randint(&gg, shapes[k], 2, -50, 50, FLOATS[d], GPU0, &g));
        T_OK(eng_tensor_randint(&gc, shapes[k], 2, -50, 50, FLOATS[d], CPU, &c));
        break;
      default:
        T_OK(eng_tensor_rand(&gg, shapes[k], 2, 0, 1, FLOATS[d], GPU0, &g));
        T_OK(eng_tensor_rand(&gc, shapes[k], 2, 0, 1, FLOATS[d], CPU, &c));
        break;
      }
      cr_assert_eq(gg.offset, gc.offset);
      expect_same_bits(g, c, "successive draws");
      eng_tensor_release(g), eng_tensor_release(c);
    }
  }
}

/* arange as eng_tensor_arange computes its length; linspace's step and the LINSPACE flag. */
static void expect_arange_matches(double start, double end, double step, eng_dtype_t dt) {
  int64_t n = (int64_t)ceil((end - start) / step);
  eng_op_attrs_t at = {.f = {start, step, end}};
  char what[128];
  snprintf(what, sizeof what, "arange(%g, %g, %g)", start, end, step);
  expect_op_matches(ENG_OP_ARANGE, &n, 1, dt, &at, what);
}

static void expect_linspace_matches(double start, double end, int64_t n, eng_dtype_t dt) {
  eng_op_attrs_t at = {.f = {start, n > 1 ? (end - start) / (double)(n - 1) : 0.0, end},
                       .flags = ENG_ATTR_LINSPACE};
  char what[128];
  snprintf(what, sizeof what, "linspace(%g, %g, %lld)", start, end, (long long)n);
  expect_op_matches(ENG_OP_ARANGE, &n, 1, dt, &at, what);
}

Test(cuda_create, arange_linspace_and_eye_match_cpu_exactly) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < ENG_DTYPE_COUNT; d++) {
    eng_dtype_t dt = ALL[d];
    expect_arange_matches(-3.5, 1000.25, 0.37, dt);
    expect_arange_matches(0, 4097, 1, dt);
    expect_arange_matches(5, -3, -0.1, dt);
    expect_arange_matches(0.1, 0.1 + 1e-3 * 1023, 1e-3, dt);
    for (size_t k = 0; k < N_SIZES; k++) {
      expect_linspace_matches(-1, 1, SIZES[k], dt);
      expect_linspace_matches(0.3, 1e6 + 0.7, SIZES[k], dt);
    }
    static const int64_t eyes[][2] = {{1, 1}, {7, 3}, {3, 7}, {1023, 5}, {64, 64}, {4097, 2}};
    for (size_t k = 0; k < sizeof eyes / sizeof eyes[0]; k++) {
      eng_op_attrs_t at = {0};
      expect_op_matches(ENG_OP_EYE, eyes[k], 2, dt, &at, "eye");
    }
  }
}

Test(cuda_create, empty_outputs) {
  SKIP_WITHOUT_GPU();
  const int64_t zero[2] = {0, 5};
  eng_op_attrs_t at = random_attrs(0, 1, 1, 0);
  expect_op_matches(ENG_OP_RAND, zero, 2, ENG_F32, &at, "rand of 0 elements");
  expect_op_matches(ENG_OP_RANDN, zero, 2, ENG_BF16, &at, "randn of 0 elements");
  expect_op_matches(ENG_OP_RANDINT, zero, 2, ENG_I64, &at, "randint of 0 elements");
  expect_op_matches(ENG_OP_EYE, zero, 2, ENG_F32, &at, "eye of 0 rows");
  expect_linspace_matches(0, 1, 0, ENG_F16);
}
