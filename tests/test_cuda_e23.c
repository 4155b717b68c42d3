/* E23 on CUDA against the CPU reference, forward and backward, every output compared: the
 * benchmark shapes (B = 4 and 64, d = 512, N = 8 and 64: cluster kernels, the forward's tape on
 * chip or in global memory), odd ones (T = 1, T = 17, B = 3, d = 100 and 33, N = 5, checkpoint
 * intervals that do not divide T), every dtype (f64: the global-memory kernels), strided inputs,
 * no state / no final gradients, T = 4096 staying finite, the tensor-core forward (16-bit,
 * d = 256 and 512; the bf16 benchmark shapes take it; at d = 512 with at most 7 batch rows it runs
 * on clusters of 16 CTAs, one row each: B = 4 and 5 here, B = 19 and 64 on clusters of 8) at
 * d = 256 with an odd N and with 8 batch rows a cluster, and the tensor-core backward (bf16, the
 * same widths; at d = 512 on clusters of 16 where those walk a segment in fewer parts: B = 4
 * N = 64) with each of its placements of dH and the segment store, and its inverted walk, and the
 * register-tape kernels of B = 64 N = 64's plan (register_tape, register_tape_backward), and the
 * backward captured in a CUDA graph.
 * Tolerances: bf16/f16 1e-2 (their f32 ckpt 1e-3); f32 3e-5 forward and 2e-4 backward (f32
 * attention and tape updates through up to 512 dependent steps, and the GPU's next-step read
 * scores come from the identity H_new h = (1 - a) H h + a (w . h) instead of a fresh pass, against
 * an f64 reference); f64 1e-9. */
#include "cuda_e_series.h"

#define SHAPE(...) \
  ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static double tol_of(eng_dtype_t dt, int bwd) {
  return dt == ENG_F64 ? 1e-9 : dt == ENG_F32 ? (bwd ? 2e-4 : 3e-5) : 1e-2;
}

/* W_write's entries are ww times W_h's range; graph: the backward also captured in a CUDA graph
 * and replayed (same_in_a_graph). */
static void check_all(int64_t B, int64_t T, int64_t N, int64_t d, int64_t C, eng_dtype_t dt,
                      int with_state, int with_final, int strided, double ww, int graph) {
  const uint64_t seed = (uint64_t)(B * 1000003 + T * 1009 + N * 101 + d * 7 + dt);
  const double ws = 1.2 / sqrt((double)d);
  pair_t in[6] = {
      e_rand(SHAPE(B, T, d), dt, seed + 1, -1, 1, strided),
      e_rand(SHAPE(d, d), dt, seed + 2, -ws, ws, strided),
      e_rand(SHAPE(d, d), dt, seed + 3, -ws * ww, ws * ww, strided),
      pair_rand(SHAPE(d), dt, seed + 4, -0.5, 0.5),
      with_state ? e_rand(SHAPE(B, d), dt, seed + 5, -0.9, 0.9, strided) : (pair_t){NULL, NULL},
      with_state ? e_rand(SHAPE(B, N, d), dt, seed + 6, -1, 1, strided) : (pair_t){NULL, NULL},
  };
  char what[256];
  snprintf(what, sizeof what, "e23 %s B=%lld T=%lld N=%lld d=%lld C=%lld%s%s%s", eng_dtype_name(dt),
           (long long)B, (long long)T, (long long)N, (long long)d, (long long)C,
           with_state ? "" : " no state", with_final ? "" : " no final grads",
           strided ? " strided" : "");
  static const char *const fwd_names[4] = {"hs", "h_T", "tape_T", "ckpt"};
  const double ft = tol_of(dt, 0);
  /* ckpt is f32 state even for 16-bit values, held to the f32 bound (3e-5) for f32; the 16-bit
   * kernels' products take the state as an f16 operand (2^-12, tc::kSingle), which leaves up to
   * ~2e-4 in the trace's w, a and r at T = 512: held to 1e-3 */
  const double ck_tol = dt == ENG_F64 ? ft : dt == ENG_F32 ? 3e-5 : 1e-3;
  const double fwd_tol[4] = {ft, ft, ft, ck_tol};
  eng_tensor_t *ref[4];
  eng_op_attrs_t attrs = {0};
  attrs.i[0] = N;
  attrs.i[1] = C;
  attrs.ni = 2;
  compare_op(ENG_OP_E23, in, 6, attrs, fwd_tol, fwd_names, what, ref);
  pair_t hs = pair_of(ref[0]), ck = pair_of(ref[3]);
  pair_t dhs = e_like(ref[0], seed + 7);
  pair_t dhT = with_final ? e_like(ref[1], seed + 8) : (pair_t){NULL, NULL};
  pair_t dtT = with_final ? e_like(ref[2], seed + 9) : (pair_t){NULL, NULL};
  pair_t bin[10] = {in[0], in[1], in[2], in[3], in[4], hs, ck, dhs, dhT, dtT};
  static const char *const bwd_names[6] = {"dxw", "dW_h", "dW_write", "db", "dh0", "dtape0"};
  const double bt = tol_of(dt, 1), bwd_tol[6] = {bt, bt, bt, bt, bt, bt};
  eng_op_attrs_t battrs = {0};
  battrs.i[0] = C;
  battrs.ni = 1;
  compare_op(ENG_OP_E23_BACKWARD, bin, 10, battrs, bwd_tol, bwd_names, what, NULL);
  if (graph) same_in_a_graph(ENG_OP_E23_BACKWARD, bin, 10, battrs, what);
  pair_release(hs), pair_release(ck), pair_release(dhs), pair_release(dhT), pair_release(dtT);
  eng_tensor_release(ref[1]), eng_tensor_release(ref[2]);
  for (int k = 0; k < 6; k++) pair_release(in[k]);
}

static void check_ww(int64_t B, int64_t T, int64_t N, int64_t d, int64_t C, eng_dtype_t dt,
                     int with_state, int with_final, int strided, double ww) {
  check_all(B, T, N, d, C, dt, with_state, with_final, strided, ww, 0);
}

static void check(int64_t B, int64_t T, int64_t N, int64_t d, int64_t C, eng_dtype_t dt,
                  int with_state, int with_final, int strided) {
  check_ww(B, T, N, d, C, dt, with_state, with_final, strided, 1);
}

Test(cuda_e23, benchmark_shapes) {
  SKIP_WITHOUT_GPU();
  check(4, 512, 8, 512, 16, ENG_BF16, 1, 1, 0);
  check(4, 512, 64, 512, 16, ENG_BF16, 1, 1, 0);
  check(64, 128, 8, 512, 16, ENG_BF16, 1, 1, 0);
  check(64, 128, 64, 512, 16, ENG_BF16, 1, 1, 0);
  check(4, 512, 64, 512, 16, ENG_F32, 1, 1, 0);
}

Test(cuda_e23, odd_shapes_and_dtypes) {
  SKIP_WITHOUT_GPU();
  const eng_dtype_t dts[4] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};
  for (int k = 0; k < 4; k++) {
    check(3, 17, 5, 100, 4, dts[k], 1, 1, 0);
    check(1, 1, 8, 33, 16, dts[k], 0, 0, 0);
    check(3, 17, 8, 64, 16, dts[k], 0, 1, 1);
  }
  check(200, 3, 8, 24, 2, ENG_BF16, 1, 1, 0); /* more batch rows than SMs */
  check(2, 9, 4, 1536, 4, ENG_F32, 1, 1, 0);  /* weights too big for a cluster */
}

/* The tensor-core forward converts each weight slice to f16 with its own power-of-two scale
 * (tc::to_f16_scaled): W_write 8 and 1/64 times W_h's range tells the two scales apart (at 64
 * times the cell is chaotic: the f32 kernel drifts from the f64 reference by 5e-3 in 9 steps). */
Test(cuda_e23, tensor_core_paths) {
  SKIP_WITHOUT_GPU();
  check(3, 17, 5, 256, 4, ENG_F16, 1, 1, 0);    /* d = 256 tiling, odd N, C not dividing T */
  check(100, 5, 8, 256, 2, ENG_BF16, 1, 0, 0);  /* 8 batch rows a cluster, the last group part-full */
  check_ww(4, 4, 8, 512, 4, ENG_BF16, 1, 1, 0, 8);
  check_ww(4, 9, 8, 512, 4, ENG_BF16, 1, 1, 0, 1.0 / 64);
}

/* The tensor-core backward (bf16; the benchmark shapes take it too: B = 4 N = 64 on clusters of 16
 * with each segment on chip in one part, B = 64 N = 8 on clusters of 8 in two parts, B = 64 N = 64
 * by the inverted walk). Here: everything on chip (d = 256 odd N: the replay's last group of four
 * slots holds one, d = 512 without state or final gradients), segments of C = 20 not dividing
 * T = 37 walked in parts (clusters of 16: 10, 10 and 9, 8 steps), the inverted walk with 2 batch
 * rows a cluster (split threads) and the last group part-full, the segment store in global scratch
 * with w_t and dH on chip (N = 66: too many slots for the inverted walk's two tapes at 5 rows),
 * and dH and w_t in global scratch (N = 600). */
Test(cuda_e23, tensor_core_backward) {
  SKIP_WITHOUT_GPU();
  check(3, 17, 5, 256, 4, ENG_BF16, 1, 1, 0);
  check(5, 7, 8, 512, 3, ENG_BF16, 0, 0, 0);
  check(4, 37, 64, 512, 20, ENG_BF16, 1, 1, 0);
  check(19, 9, 64, 512, 4, ENG_BF16, 1, 1, 0);
  check(64, 9, 66, 512, 4, ENG_BF16, 1, 1, 0);
  check(2, 5, 600, 512, 2, ENG_BF16, 1, 1, 0);
}

/* The inverted walk (kInverted in cuda/e23_bwd_tc.cuh) steps each tape back through
 * H_t = (H_{t+1} - a_t w_t) / (1 - a_t), and replays a step's tape from the segment's checkpoint
 * instead where the product of the steps' largest 1 / (1 - a) since the last exact tape would pass
 * 8. A row's largest a_t is at least 1 / N, so at N = 64 the product passes 8 within 133 steps
 * whatever the data: C = 256 replays exact tapes in the first segment and steps back from them,
 * and the last segment, 4 steps, steps back from its end. B = 5: one row a cluster (checkpoint
 * intervals this long leave no room for a segment store on chip). The benchmark shape B = 64
 * N = 64 (5 rows a cluster, the state buffers' planes kInvRows apart), B = 19 in
 * tensor_core_backward and quad_split's B = 64 N = 37 (a part-full last chunk of slots) step
 * back too. B = 50 N = 128 at d = 256: 4 rows a cluster of 128 threads, whose a_t and r_t
 * (512 entries) reach a thread's registers for its first two and come from global memory for the
 * rest at the step's start (4 steps of tapes, 256 KB, do not fit on chip). */
Test(cuda_e23, inverted_walk) {
  SKIP_WITHOUT_GPU();
  check(5, 260, 64, 512, 256, ENG_BF16, 1, 1, 0);
  check(50, 12, 128, 256, 8, ENG_BF16, 1, 1, 0);
}

/* The slot split of the tensor-core kernels (slot_split in cuda/e23.cu) where the slots do not
 * divide evenly: N = 37 at d = 512 gives 2 split threads a pair with 18 and 19 slots, N = 41 at
 * d = 256 gives 4 with 10, 10, 10 and 11 (forward f16 and bf16, backward bf16). The benchmark
 * shape B = 4 N = 64 splits 16 ways (clusters of 16); tensor_core_backward's B = 19 N = 64
 * splits 4 ways with 2 batch rows a cluster and the last group part-full. */
Test(cuda_e23, slot_split) {
  SKIP_WITHOUT_GPU();
  check(4, 9, 37, 512, 4, ENG_BF16, 1, 1, 0);
  check(3, 17, 41, 256, 4, ENG_BF16, 1, 1, 0);
  check(3, 17, 41, 256, 4, ENG_F16, 0, 1, 1);
}

/* The forward's quad split (quad_parts in cuda/e23.cu), where more than 4 batch rows a cluster
 * leave the pair split off: B = 64 at d = 512 runs 13 clusters of 5 rows, so 80 quads of columns
 * whose slots split 3 ways (N = 37: 12, 12 and 13; N = 63: 21 each); B = 150 at d = 256, 5 rows
 * a cluster where 30 clusters are resident, splits 40 quads 3 ways. */
Test(cuda_e23, quad_split) {
  SKIP_WITHOUT_GPU();
  check(64, 9, 37, 512, 4, ENG_BF16, 1, 1, 0);
  check(64, 9, 63, 512, 4, ENG_F16, 1, 1, 1);
  check(150, 9, 41, 256, 4, ENG_BF16, 1, 1, 0);
}

/* The register-tape forward (cuda/e23_fwd_rt.cuh) runs where the tensor-core plan puts 5 batch
 * rows on each cluster of 8 at N = 64 and d = 512 (benchmark_shapes' B = 64 N = 64: the last
 * cluster holds 4 real rows). Here B = 61 (the last cluster 1 real row) in f16 without state,
 * checkpoints every 4 of 19 steps (the last segment short), strided inputs; and T = 1. */
Test(cuda_e23, register_tape) {
  SKIP_WITHOUT_GPU();
  check(61, 19, 64, 512, 4, ENG_F16, 0, 1, 1);
  check(64, 1, 64, 512, 16, ENG_BF16, 1, 1, 0);
}

/* The register-tape backward (cuda/e23_bwd_rt.cuh) runs where the tensor-core backward walks 5
 * batch rows a cluster of 8 inverted at N = 64 and d = 512 (benchmark_shapes' B = 64 N = 64 and
 * register_tape's bf16 T = 1). Here B = 61 (the last cluster 1 real row) without state,
 * checkpoints every 4 of 19 steps, strided inputs; and 64-step segments, long enough for the
 * bound on the stepped-back tape's errors to pass 2^3 (a_t's largest over a group's 320 entries
 * is ~0.1 here: ~0.15 bits a step) so that steps replay their tape from the checkpoint. */
Test(cuda_e23, register_tape_backward) {
  SKIP_WITHOUT_GPU();
  check(61, 19, 64, 512, 4, ENG_BF16, 0, 1, 1);
  check(64, 100, 64, 512, 64, ENG_BF16, 1, 1, 0);
}

Test(cuda_e23, long_sequences_stay_finite) {
  SKIP_WITHOUT_GPU();
  check(2, 4096, 8, 64, 64, ENG_BF16, 1, 1, 0);
}

/* The backward captured in a CUDA graph and replayed gives its eager gradients (the register-tape
 * backward at B = 64 N = 64, the generic kernels at B = 3 d = 33). */
Test(cuda_e23, backward_in_a_graph) {
  SKIP_WITHOUT_GPU();
  check_all(3, 17, 5, 33, 4, ENG_BF16, 1, 1, 0, 1, 1);
  check_all(64, 64, 64, 512, 16, ENG_BF16, 1, 1, 0, 1, 1);
}
