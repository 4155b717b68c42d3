/* E1 on CUDA against the CPU reference, forward and backward, every output compared: the
 * benchmark shapes (B = 4 and 64, d = 512 and 768, T = 512 for B = 4: the cluster kernels with
 * 16-byte loads), odd ones (T = 1, T = 17, B = 3; d = 33, and d = 100 for 16-bit values: scalar
 * loads; d = 2048 in f32: W_h too big for a cluster, the global-memory kernel; f64: the
 * global-memory kernel), every dtype, strided inputs, no h0 / no dh_T, T = 4096 staying finite,
 * and the backward captured in a CUDA graph. Tolerances: bf16/f16 1e-2; f32 2e-5 (forward) and 5e-5 (backward: f32 sums through up
 * to 512 dependent steps against an f64 reference); f64 1e-10. */
#include "cuda_e_series.h"

#define SHAPE(...) \
  ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static double tol_of(eng_dtype_t dt, int bwd) {
  return dt == ENG_F64 ? 1e-10 : dt == ENG_F32 ? (bwd ? 5e-5 : 2e-5) : 1e-2;
}

/* graph: the backward also captured in a CUDA graph and replayed (same_in_a_graph) */
static void check_in(int64_t B, int64_t T, int64_t d, eng_dtype_t dt, int with_h0, int with_dhT,
                     int strided, int graph) {
  const uint64_t seed = (uint64_t)(B * 1000003 + T * 1009 + d * 7 + dt);
  const double ws = 1.5 / sqrt((double)d); /* spectral radius ~0.9: errors do not compound */
  pair_t in[6] = {
      e_rand(SHAPE(B, T, d), dt, seed + 1, -1, 1, strided),
      e_rand(SHAPE(B, T, d), dt, seed + 2, -2, 2, strided),
      e_rand(SHAPE(d, d), dt, seed + 3, -ws, ws, strided),
      pair_rand(SHAPE(d), dt, seed + 4, -0.5, 0.5),
      with_h0 ? e_rand(SHAPE(B, d), dt, seed + 5, -0.9, 0.9, strided) : (pair_t){NULL, NULL},
  };
  char what[256];
  snprintf(what, sizeof what, "e1 %s B=%lld T=%lld d=%lld%s%s%s", eng_dtype_name(dt), (long long)B,
           (long long)T, (long long)d, with_h0 ? "" : " no h0", with_dhT ? "" : " no dh_T",
           strided ? " strided" : "");
  static const char *const fwd_names[3] = {"y", "h_T", "hs"};
  const double ft = tol_of(dt, 0), fwd_tol[3] = {ft, ft, ft};
  eng_tensor_t *ref[3];
  eng_op_attrs_t attrs = {0};
  compare_op(ENG_OP_E1, in, 5, attrs, fwd_tol, fwd_names, what, ref);
  /* backward from the CPU's hs (both sides read the same saved sequence) */
  pair_t hs = pair_of(ref[2]);
  pair_t dy = e_like(ref[0], seed + 6),
         dhT = with_dhT ? e_like(ref[1], seed + 7) : (pair_t){NULL, NULL};
  pair_t bin[6] = {in[1], in[2], in[4], hs, dy, dhT};
  static const char *const bwd_names[5] = {"dxw", "dz", "dW_h", "db", "dh0"};
  const double bt = tol_of(dt, 1), bwd_tol[5] = {bt, bt, bt, bt, bt};
  compare_op(ENG_OP_E1_BACKWARD, bin, 6, attrs, bwd_tol, bwd_names, what, NULL);
  if (graph) same_in_a_graph(ENG_OP_E1_BACKWARD, bin, 6, attrs, what);
  pair_release(hs), pair_release(dy), pair_release(dhT);
  eng_tensor_release(ref[0]), eng_tensor_release(ref[1]);
  for (int k = 0; k < 5; k++) pair_release(in[k]);
}

static void check(int64_t B, int64_t T, int64_t d, eng_dtype_t dt, int with_h0, int with_dhT,
                  int strided) {
  check_in(B, T, d, dt, with_h0, with_dhT, strided, 0);
}

Test(cuda_e1, benchmark_shapes) {
  SKIP_WITHOUT_GPU();
  check(4, 512, 512, ENG_BF16, 1, 1, 0);
  check(4, 512, 768, ENG_BF16, 1, 1, 0);
  /* B = 64 at T = 128: the kernels' plan depends on B and d only, and the f64 CPU reference of
   * T = 512 would take most of the test's time */
  check(64, 128, 512, ENG_BF16, 1, 1, 0);
  check(64, 128, 768, ENG_BF16, 1, 1, 0);
  check(4, 512, 768, ENG_F32, 1, 1, 0);
  check(64, 128, 512, ENG_F32, 1, 1, 0);
}

Test(cuda_e1, odd_shapes_and_dtypes) {
  SKIP_WITHOUT_GPU();
  const eng_dtype_t dts[4] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};
  for (int k = 0; k < 4; k++) {
    check(3, 17, 100, dts[k], 1, 1, 0);
    check(1, 1, 33, dts[k], 0, 0, 0);
    check(3, 17, 64, dts[k], 0, 1, 1);
  }
  check(2, 5, 2048, ENG_F32, 1, 1, 0);  /* W_h of 16 MB: the global-memory kernel */
  check(200, 3, 24, ENG_BF16, 1, 1, 0); /* more batch rows than SMs */
}

/* The tensor-core kernels (16-bit values, d = 256, 512, 768, 1024) where the shapes above leave
 * them out: f16 (forward only; its backward keeps the f32-state kernel), the 16-CTA tiling of
 * d = 1024, a last batch group of 8 with only 4 rows (B = 100, d = 256: the unpacked product;
 * every other shape here has groups of at most 4 rows, packed), a packed last group of 4 with
 * one row (B = 33, d = 512), and T = 1 and 2 (the exchange's first fills: none forward at T = 1,
 * one backward), also with groups of 2 rows, the last of 1 (B = 21, d = 768 at T = 1 and 2; B = 11,
 * d = 1024 at 16 CTAs a cluster). */
Test(cuda_e1, tensor_core_paths) {
  SKIP_WITHOUT_GPU();
  check(4, 1, 512, ENG_BF16, 1, 1, 0);
  check(4, 2, 512, ENG_BF16, 1, 1, 1);
  check(3, 17, 512, ENG_F16, 1, 1, 0);
  check(4, 32, 1024, ENG_BF16, 1, 1, 0);
  check(100, 5, 256, ENG_BF16, 1, 0, 0);
  check(33, 3, 512, ENG_BF16, 1, 1, 0);
  check(21, 1, 768, ENG_BF16, 1, 1, 0);
  check(21, 2, 768, ENG_BF16, 0, 1, 1);
  check(11, 3, 1024, ENG_BF16, 1, 0, 0);
}

/* The tensor-core forward converts W_h to f16 scaled by a power of two per CTA
 * (tc::to_f16_scaled): entries beyond f16's range (|w| up to 2e5; unscaled they would be inf) and
 * far below its normal range (|w| up to 1e-7, where h_1 = tanh(W_h h0 + tiny) is the product
 * alone; unscaled they would be f16 subnormals of one or two bits). Forward only, bf16. */
static void check_weight_range(int64_t B, int64_t T, int64_t d, double wmax, double xmax) {
  const uint64_t seed = (uint64_t)(B * 31 + T * 7 + d) + (wmax > 1 ? 1 : 2);
  pair_t in[5] = {
      e_rand(SHAPE(B, T, d), ENG_BF16, seed + 1, -xmax, xmax, 0),
      e_rand(SHAPE(B, T, d), ENG_BF16, seed + 2, -2, 2, 0),
      e_rand(SHAPE(d, d), ENG_BF16, seed + 3, -wmax, wmax, 0),
      pair_rand(SHAPE(d), ENG_BF16, seed + 4, -xmax, xmax),
      e_rand(SHAPE(B, d), ENG_BF16, seed + 5, -0.9, 0.9, 0),
  };
  char what[128];
  snprintf(what, sizeof what, "e1 bf16 B=%lld T=%lld d=%lld |W_h| <= %g", (long long)B, (long long)T,
           (long long)d, wmax);
  static const char *const names[3] = {"y", "h_T", "hs"};
  const double tol[3] = {1e-2, 1e-2, 1e-2};
  eng_op_attrs_t attrs = {0};
  compare_op(ENG_OP_E1, in, 5, attrs, tol, names, what, NULL);
  for (int k = 0; k < 5; k++) pair_release(in[k]);
}

Test(cuda_e1, weights_outside_f16_range) {
  SKIP_WITHOUT_GPU();
  check_weight_range(4, 4, 512, 2e5, 1);
  check_weight_range(4, 2, 512, 1e-7, 1e-9);
  check_weight_range(64, 2, 768, 1e-7, 1e-9);
}

Test(cuda_e1, long_sequences_stay_finite) {
  SKIP_WITHOUT_GPU();
  check(2, 4096, 256, ENG_BF16, 1, 1, 0);
}

/* The backward captured in a CUDA graph and replayed gives its eager gradients. */
Test(cuda_e1, backward_in_a_graph) {
  SKIP_WITHOUT_GPU();
  check_in(3, 17, 100, ENG_BF16, 1, 1, 0, 1);
  check_in(64, 64, 512, ENG_BF16, 0, 1, 0, 1);
}
