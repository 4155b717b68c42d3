/* matmul and linear on CUDA against the CPU reference: fresh random inputs copied to the GPU, the
 * GPU output poisoned with NaN before the op runs, error as ||gpu - cpu|| / ||cpu|| within the
 * design's tolerances (f64 1e-12, f32 1e-5 -- so f32 must not go through TF32 --, f16/bf16 1e-2).
 * Odd sizes (1, 7, 1023, 4097), transposed, sliced, strided and misaligned views, batched products
 * with broadcast batch dims, 1-D operands, empty products, every activation with and without a
 * bias, and a product captured in a CUDA graph. Every test skips itself without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_numeric.h"

#define CUDA0 GPU0

static const eng_dtype_t FLOATS[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};
#define N_FLOATS (int)(sizeof FLOATS / sizeof FLOATS[0])

#define RAND_PAIR(dt, seed, ...) \
  pair_rand((const int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), dt, seed, -1, 1)

/* Runs op `id` on the CPU inputs, then on the GPU inputs into a NaN-filled output, and compares. */
static void check_op(eng_op_id_t id, const pair_t *in, int n, int act, const char *what) {
  eng_tensor_t *cin[3] = {NULL}, *gin[3] = {NULL};
  for (int k = 0; k < n; k++) {
    cin[k] = in[k].c;
    gin[k] = in[k].g;
  }
  eng_op_call_t c = {.id = id, .n_in = n, .in = cin, .n_out = 1};
  c.attrs.i[0] = act;
  c.attrs.ni = 1;
  T_OK(eng_op_dispatch(&c));
  eng_tensor_t *ref = c.out[0], *out = NULL;
  T_OK(eng_tensor_full(ref->shape, ref->ndim, NAN, ref->dtype, CUDA0, &out));
  eng_op_call_t g = {.id = id, .n_in = n, .in = gin, .n_out = 1, .out = {out}};
  g.attrs = c.attrs;
  T_OK(eng_op_dispatch(&g));
  double *rv = t_values(ref);
  double err = t_rel_err(out, rv, eng_tensor_numel(ref));
  char s[128];
  cr_assert(err <= t_tol(ref->dtype), "%s (%s, out %s): rel err %g > %g", what,
            eng_dtype_name(ref->dtype), ENG_SHAPE_STR(ref, s), err, t_tol(ref->dtype));
  free(rv);
  eng_tensor_release(ref);
  eng_tensor_release(out);
}

/* Checks a @ b and releases both. */
static void check_matmul(pair_t a, pair_t b, const char *what) {
  pair_t in[2] = {a, b};
  check_op(ENG_OP_MATMUL, in, 2, 0, what);
  pair_release(a);
  pair_release(b);
}

/* Checks linear(x, w, b, act) and releases the pairs (b may be absent: has_b = 0). */
static void check_linear(pair_t x, pair_t w, pair_t b, int has_b, int act, const char *what) {
  pair_t in[3] = {x, w, has_b ? b : (pair_t){NULL, NULL}};
  check_op(ENG_OP_LINEAR, in, 3, act, what);
  pair_release(x);
  pair_release(w);
  if (has_b) pair_release(b);
}

static const int64_t MKN[][3] = {
    {1, 1, 1},  {1, 7, 1},      {7, 7, 7},       {1, 4097, 7},    {4097, 1, 7},
    {4, 512, 512}, {7, 1023, 4097}, {1023, 7, 1023}, {1023, 1023, 1023},
};

Test(cuda_matmul, sizes_and_dtypes) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < N_FLOATS; d++)
    for (size_t s = 0; s < sizeof MKN / sizeof MKN[0]; s++) {
      int64_t m = MKN[s][0], k = MKN[s][1], n = MKN[s][2];
      char what[96];
      snprintf(what, sizeof what, "[%lld,%lld] @ [%lld,%lld]", (long long)m, (long long)k,
               (long long)k, (long long)n);
      check_matmul(RAND_PAIR(FLOATS[d], 10 + s, m, k), RAND_PAIR(FLOATS[d], 20 + s, k, n), what);
    }
}

Test(cuda_matmul, transposed_sliced_and_strided_views) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < N_FLOATS; d++) {
    eng_dtype_t dt = FLOATS[d];
    /* transpose flags, no copies */
    check_matmul(transpose_pair(RAND_PAIR(dt, 1, 1023, 7), 0, 1), RAND_PAIR(dt, 2, 1023, 9), "a^T @ b");
    check_matmul(RAND_PAIR(dt, 3, 7, 1023), transpose_pair(RAND_PAIR(dt, 4, 9, 1023), 0, 1), "a @ b^T");
    check_matmul(transpose_pair(RAND_PAIR(dt, 5, 4097, 7), 0, 1),
                 transpose_pair(RAND_PAIR(dt, 6, 9, 4097), 0, 1), "a^T @ b^T");
    /* a leading dim larger than the row, and a pointer one element off alignment */
    check_matmul(slice_pair(RAND_PAIR(dt, 7, 7, 1030), 1, 1, 1024, 1), RAND_PAIR(dt, 8, 1023, 7),
                 "column slice of a");
    check_matmul(RAND_PAIR(dt, 9, 7, 1023), slice_pair(RAND_PAIR(dt, 10, 1023, 12), 1, 3, 12, 1),
                 "column slice of b");
    /* neither stride is 1: goes through a copy */
    check_matmul(slice_pair(RAND_PAIR(dt, 11, 7, 46), 1, 0, 46, 2), RAND_PAIR(dt, 12, 23, 5),
                 "every other column of a");
    check_matmul(RAND_PAIR(dt, 13, 5, 23), slice_pair(RAND_PAIR(dt, 14, 46, 9), 0, 0, 46, 2),
                 "every other row of b");
  }
}

Test(cuda_matmul, batched_with_broadcast) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < N_FLOATS; d++) {
    eng_dtype_t dt = FLOATS[d];
    check_matmul(RAND_PAIR(dt, 30, 3, 5, 7, 9), RAND_PAIR(dt, 31, 9, 11), "shared b (folded into rows)");
    check_matmul(RAND_PAIR(dt, 32, 2, 1023, 9), RAND_PAIR(dt, 33, 2, 9, 7), "strided batch");
    check_matmul(RAND_PAIR(dt, 34, 7, 9), RAND_PAIR(dt, 35, 3, 9, 11), "shared a (batch stride 0)");
    check_matmul(RAND_PAIR(dt, 36, 3, 1, 7, 9), RAND_PAIR(dt, 37, 4, 9, 11), "a and b broadcast both ways");
    check_matmul(RAND_PAIR(dt, 38, 2, 1, 7, 9), RAND_PAIR(dt, 39, 1, 3, 9, 11), "[2,1] x [1,3] batches");
    int64_t wide[3] = {4, 7, 9};
    check_matmul(expand_pair(RAND_PAIR(dt, 40, 1, 7, 9), wide, 3), RAND_PAIR(dt, 41, 4, 9, 11),
                 "expanded a (stride-0 batch)");
    check_matmul(transpose_pair(RAND_PAIR(dt, 42, 2, 9, 7), 1, 2),
                 transpose_pair(RAND_PAIR(dt, 43, 2, 11, 9), 1, 2), "batched transposes");
    check_matmul(slice_pair(RAND_PAIR(dt, 44, 2, 7, 12), 2, 1, 10, 1), RAND_PAIR(dt, 45, 2, 9, 5),
                 "batched column slices");
    check_matmul(transpose_pair(RAND_PAIR(dt, 46, 7, 3, 9), 0, 1), RAND_PAIR(dt, 47, 9, 5),
                 "batch dim not outermost in memory");
  }
}

Test(cuda_matmul, one_dimensional_operands) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < N_FLOATS; d++) {
    eng_dtype_t dt = FLOATS[d];
    check_matmul(RAND_PAIR(dt, 50, 1023), RAND_PAIR(dt, 51, 1023, 7), "vector @ matrix");
    check_matmul(RAND_PAIR(dt, 52, 7, 1023), RAND_PAIR(dt, 53, 1023), "matrix @ vector");
    check_matmul(RAND_PAIR(dt, 54, 4097), RAND_PAIR(dt, 55, 4097), "dot");
    check_matmul(RAND_PAIR(dt, 56, 2, 7, 9), RAND_PAIR(dt, 57, 9), "batch @ vector");
    check_matmul(RAND_PAIR(dt, 58, 9), RAND_PAIR(dt, 59, 3, 9, 7), "vector @ batch");
    check_matmul(slice_pair(RAND_PAIR(dt, 60, 18), 0, 0, 18, 2), RAND_PAIR(dt, 61, 9, 7),
                 "strided vector @ matrix");
    check_matmul(RAND_PAIR(dt, 62, 7, 9), slice_pair(RAND_PAIR(dt, 63, 27), 0, 1, 27, 3),
                 "matrix @ strided vector");
  }
}

Test(cuda_matmul, empty_products) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < N_FLOATS; d++) {
    eng_dtype_t dt = FLOATS[d];
    check_matmul(RAND_PAIR(dt, 70, 4, 0), RAND_PAIR(dt, 71, 0, 5), "k = 0 gives zeros");
    check_matmul(RAND_PAIR(dt, 72, 3, 4, 0), RAND_PAIR(dt, 73, 0, 5), "batched k = 0");
    check_matmul(RAND_PAIR(dt, 74, 0, 7), RAND_PAIR(dt, 75, 7, 5), "m = 0");
    check_matmul(RAND_PAIR(dt, 76, 4, 7), RAND_PAIR(dt, 77, 7, 0), "n = 0");
    check_matmul(RAND_PAIR(dt, 78, 0, 4, 7), RAND_PAIR(dt, 79, 7, 5), "batch 0");
  }
}

static const char *const ACT_NAMES[] = {"none", "relu", "gelu"};

Test(cuda_linear, activations_bias_and_dtypes) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < N_FLOATS; d++)
    for (int act = 0; act < ENG_ACT_COUNT; act++)
      for (int has_b = 0; has_b < 2; has_b++) {
        eng_dtype_t dt = FLOATS[d];
        char what[64];
        snprintf(what, sizeof what, "linear 4x512x512, act %s, %s", ACT_NAMES[act],
                 has_b ? "bias" : "no bias");
        check_linear(RAND_PAIR(dt, 100, 4, 512), RAND_PAIR(dt, 101, 512, 512),
                     has_b ? RAND_PAIR(dt, 102, 512) : (pair_t){NULL, NULL}, has_b, act, what);
      }
}

Test(cuda_linear, odd_sizes_and_shapes) {
  SKIP_WITHOUT_GPU();
  static const int64_t RKN[][3] = {{1, 7, 1}, {7, 1023, 9}, {1023, 1, 7}, {5, 4097, 7}, {1, 7, 4097}};
  for (int d = 0; d < N_FLOATS; d++) {
    eng_dtype_t dt = FLOATS[d];
    for (size_t s = 0; s < sizeof RKN / sizeof RKN[0]; s++) {
      int64_t r = RKN[s][0], k = RKN[s][1], n = RKN[s][2];
      char what[96];
      snprintf(what, sizeof what, "linear [%lld,%lld] -> %lld, gelu", (long long)r, (long long)k,
               (long long)n);
      check_linear(RAND_PAIR(dt, 110 + s, r, k), RAND_PAIR(dt, 120 + s, n, k),
                   RAND_PAIR(dt, 130 + s, n), 1, ENG_ACT_GELU_TANH, what);
    }
    check_linear(RAND_PAIR(dt, 140, 2, 3, 7), RAND_PAIR(dt, 141, 5, 7), RAND_PAIR(dt, 142, 5), 1,
                 ENG_ACT_RELU, "3-D x");
    check_linear(RAND_PAIR(dt, 143, 7), RAND_PAIR(dt, 144, 5, 7), RAND_PAIR(dt, 145, 5), 1,
                 ENG_ACT_NONE, "1-D x");
  }
}

Test(cuda_linear, views_and_alignment) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < N_FLOATS; d++) {
    eng_dtype_t dt = FLOATS[d];
    check_linear(transpose_pair(RAND_PAIR(dt, 150, 64, 33), 0, 1), RAND_PAIR(dt, 151, 17, 64),
                 RAND_PAIR(dt, 152, 17), 1, ENG_ACT_RELU, "transposed x");
    check_linear(RAND_PAIR(dt, 153, 33, 64), transpose_pair(RAND_PAIR(dt, 154, 64, 17), 0, 1),
                 RAND_PAIR(dt, 155, 17), 1, ENG_ACT_GELU_TANH, "transposed W");
    check_linear(RAND_PAIR(dt, 156, 33, 64), slice_pair(RAND_PAIR(dt, 157, 17, 70), 1, 3, 67, 1),
                 slice_pair(RAND_PAIR(dt, 158, 34), 0, 0, 34, 2), 1, ENG_ACT_GELU_TANH,
                 "sliced W, strided bias");
    /* every pointer one element off: the heuristic must allow for it, or the fallback runs */
    check_linear(slice_pair(RAND_PAIR(dt, 159, 33, 65), 1, 1, 65, 1),
                 slice_pair(RAND_PAIR(dt, 160, 17, 65), 1, 1, 65, 1),
                 slice_pair(RAND_PAIR(dt, 161, 18), 0, 1, 18, 1), 1, ENG_ACT_RELU,
                 "misaligned x, W and bias");
    check_linear(slice_pair(RAND_PAIR(dt, 162, 3, 20, 64), 1, 0, 20, 2), RAND_PAIR(dt, 163, 9, 64),
                 RAND_PAIR(dt, 164, 9), 1, ENG_ACT_NONE, "every other row of x (leading dim 128)");
    check_linear(slice_pair(RAND_PAIR(dt, 165, 3, 20, 64), 1, 0, 10, 1), RAND_PAIR(dt, 166, 9, 64),
                 RAND_PAIR(dt, 167, 9), 1, ENG_ACT_NONE, "x rows that are not one view (copied)");
  }
}

Test(cuda_linear, empty_inner_dim_gives_act_of_bias) {
  SKIP_WITHOUT_GPU();
  for (int d = 0; d < N_FLOATS; d++)
    for (int act = 0; act < ENG_ACT_COUNT; act++) {
      eng_dtype_t dt = FLOATS[d];
      check_linear(RAND_PAIR(dt, 170, 4, 0), RAND_PAIR(dt, 171, 3, 0), RAND_PAIR(dt, 172, 3), 1,
                   act, "K = 0 with a bias");
      check_linear(RAND_PAIR(dt, 173, 4, 0), RAND_PAIR(dt, 174, 3, 0), (pair_t){NULL, NULL}, 0,
                   act, "K = 0 without a bias");
      check_linear(RAND_PAIR(dt, 175, 0, 5), RAND_PAIR(dt, 176, 3, 5), RAND_PAIR(dt, 177, 3), 1,
                   act, "no rows");
    }
}

/* The typed functions promote and run on the GPU, and repeated calls (the cached plan) agree. */
Test(cuda_linear, typed_function_and_plan_reuse) {
  SKIP_WITHOUT_GPU();
  pair_t x = RAND_PAIR(ENG_BF16, 180, 4, 512), w = RAND_PAIR(ENG_BF16, 181, 512, 512),
         b = RAND_PAIR(ENG_BF16, 182, 512);
  eng_tensor_t *ref = NULL;
  T_OK(eng_op_linear(x.c, w.c, b.c, ENG_ACT_GELU_TANH, &ref));
  double *rv = t_values(ref);
  for (int rep = 0; rep < 3; rep++) {
    eng_tensor_t *y = NULL;
    T_OK(eng_op_linear(x.g, w.g, b.g, ENG_ACT_GELU_TANH, &y));
    cr_assert(eng_tensor_device(y).type == ENG_DEV_CUDA, "the result stays on the GPU");
    double err = t_rel_err(y, rv, eng_tensor_numel(ref));
    cr_assert(err <= 1e-2, "repeat %d: rel err %g", rep, err);
    eng_tensor_release(y);
  }
  free(rv);
  eng_tensor_release(ref);
  pair_release(x);
  pair_release(w);
  pair_release(b);
}

/* Captured ops may not synchronise; the plan for this shape is built during the capture. */
Test(cuda_linear, captured_in_a_graph) {
  SKIP_WITHOUT_GPU();
  pair_t warm_x = RAND_PAIR(ENG_F32, 190, 3, 8), warm_w = RAND_PAIR(ENG_F32, 191, 5, 8);
  eng_tensor_t *warm = NULL; /* creates the handle before the capture */
  T_OK(eng_op_linear(warm_x.g, warm_w.g, NULL, ENG_ACT_NONE, &warm));
  eng_tensor_release(warm);
  pair_release(warm_x);
  pair_release(warm_w);

  pair_t x = RAND_PAIR(ENG_BF16, 192, 4, 512), w = RAND_PAIR(ENG_BF16, 193, 512, 512),
         b = RAND_PAIR(ENG_BF16, 194, 512), a = RAND_PAIR(ENG_F32, 195, 6, 7, 9),
         c = RAND_PAIR(ENG_F32, 196, 9, 11);
  eng_cuda_graph_t *graph = NULL;
  eng_tensor_t *y = NULL, *z = NULL, *y_ref = NULL, *z_ref = NULL;
  T_OK(eng_cuda_graph_begin(0, &graph));
  eng_status_t st1 = eng_op_linear(x.g, w.g, b.g, ENG_ACT_RELU, &y);
  eng_status_t st2 = eng_op_matmul(a.g, c.g, &z);
  T_OK(eng_cuda_graph_end(&graph));
  cr_assert(st1 == ENG_OK && st2 == ENG_OK, "ops during capture failed: %s", eng_last_error());
  T_OK(eng_cuda_graph_replay(graph));
  T_OK(eng_cuda_synchronize(0));
  T_OK(eng_op_linear(x.c, w.c, b.c, ENG_ACT_RELU, &y_ref));
  T_OK(eng_op_matmul(a.c, c.c, &z_ref));
  double *yv = t_values(y_ref), *zv = t_values(z_ref);
  double ey = t_rel_err(y, yv, eng_tensor_numel(y_ref)), ez = t_rel_err(z, zv, eng_tensor_numel(z_ref));
  cr_assert(ey <= 1e-2 && ez <= 1e-5, "replayed graph: linear rel err %g, matmul rel err %g", ey, ez);
  free(yv);
  free(zv);
  eng_tensor_release(y);
  eng_tensor_release(z);
  eng_tensor_release(y_ref);
  eng_tensor_release(z_ref);
  eng_cuda_graph_free(graph);
  pair_release(x);
  pair_release(w);
  pair_release(b);
  pair_release(a);
  pair_release(c);
}

/* Products of at least 2^33 flops are autotuned once per shape (blaslt.c times the top
 * candidates): the tuned plan must still compute the product, on its first call and after. */
Test(cuda_matmul, autotuned_large_products) {
  SKIP_WITHOUT_GPU();
  for (int rep = 0; rep < 2; rep++) {
    check_matmul(RAND_PAIR(ENG_BF16, 90 + rep, 2048, 1024), RAND_PAIR(ENG_BF16, 92 + rep, 1024, 2048),
                 rep ? "bf16 2048x1024x2048, tuned plan" : "bf16 2048x1024x2048, first call (tunes)");
  }
  check_matmul(RAND_PAIR(ENG_F32, 94, 2048, 1024), RAND_PAIR(ENG_F32, 95, 1024, 2048),
               "f32 2048x1024x2048 (tunes)");
}
