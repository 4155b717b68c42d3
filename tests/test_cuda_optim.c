/* The scatter and optimizer ops on CUDA against the CPU reference, at sizes and list lengths the
 * op table (test_cuda_ops.c) does not reach: more tensors than one launch's table holds, mixed
 * dtypes in one list, odd sizes around the chunk length, the embedding-backward shape, several
 * AdamW steps, determinism of sum_squares, and the bounds check of the scatters. */
#include "cuda_numeric.h"

/* Tensors per launch of the multi-tensor kernels (ENG_KCUDA_MT_MAX of kernels/cuda/optim.h). */
#define MT_MAX 160

/* A list of n tensors of mixed dtypes and sizes (1, odd, around the chunk of 8192, a few large) on
 * both devices; dts picks the dtype of entry i as dts[i % ndts]. */
typedef struct {
  int n;
  pair_t *t;
} list_t;

static int64_t size_of(int i) {
  static const int64_t sizes[] = {1, 7, 8191, 8192, 8193, 1023, 3 * 8192 + 5, 100003, 33, 4097};
  return sizes[i % 10];
}

static list_t list_rand(int n, const eng_dtype_t *dts, int ndts, uint64_t seed, double lo, double hi) {
  list_t l = {n, calloc((size_t)n, sizeof(pair_t))};
  for (int i = 0; i < n; i++) {
    int64_t s = size_of(i);
    l.t[i] = pair_rand(&s, 1, dts[i % ndts], seed + (uint64_t)i, lo, hi);
  }
  return l;
}

static void list_release(list_t l) {
  for (int i = 0; i < l.n; i++) pair_release(l.t[i]);
  free(l.t);
}

static void side(const list_t *l, int gpu, eng_tensor_t **out) {
  for (int i = 0; i < l->n; i++) out[i] = gpu ? l->t[i].g : l->t[i].c;
}

/* The GPU tensors of l against their CPU twins. */
static void expect_list(const list_t *l, const char *what) {
  for (int i = 0; i < l->n; i++) {
    char w[96];
    snprintf(w, sizeof w, "%s, tensor %d", what, i);
    eng_tensor_retain(l->t[i].g);
    expect_close(l->t[i].g, l->t[i].c, w);
  }
}

/* 170 params (two launches) mixing f32, bf16 with f32 grads, f16 and f64; four AdamW steps on
 * both sides from the same state. */
Test(cuda_optim, adamw_long_mixed_list) {
  SKIP_WITHOUT_GPU();
  enum { N = 170 };
  cr_assert(N > MT_MAX, "the list must need more than one launch");
  static const eng_dtype_t pd[] = {ENG_F32, ENG_BF16, ENG_F16, ENG_F64, ENG_BF16};
  static const eng_dtype_t gd[] = {ENG_F32, ENG_F32, ENG_F16, ENG_F64, ENG_BF16};
  static const eng_dtype_t md[] = {ENG_F32, ENG_F32, ENG_F32, ENG_F64, ENG_F32};
  list_t p = list_rand(N, pd, 5, 1000, -1, 1), m = list_rand(N, md, 5, 2000, -0.1, 0.1);
  list_t v = list_rand(N, md, 5, 3000, 0.01, 0.3);
  eng_tensor_t *pc[N], *pg[N], *mc[N], *mg[N], *vc[N], *vg[N], *gc[N], *gg[N];
  side(&p, 0, pc), side(&p, 1, pg), side(&m, 0, mc), side(&m, 1, mg), side(&v, 0, vc), side(&v, 1, vg);
  for (int s = 1; s <= 4; s++) {
    list_t g = list_rand(N, gd, 5, 10000 * (uint64_t)s, -1, 1);
    side(&g, 0, gc), side(&g, 1, gg);
    eng_adamw_hparams_t h = {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                             .weight_decay = 0.1, .step = s};
    T_OK(eng_op_adamw_(pc, gc, mc, vc, N, &h));
    T_OK(eng_op_adamw_(pg, gg, mg, vg, N, &h));
    list_release(g);
  }
  expect_list(&p, "adamw_ params");
  expect_list(&m, "adamw_ exp_avg");
  expect_list(&v, "adamw_ exp_avg_sq");
  list_release(p), list_release(m), list_release(v);
}

/* sum_squares over a long mixed list with strided members: the CPU value, and the same bits on
 * every GPU run. */
Test(cuda_optim, sum_squares_long_list_deterministic) {
  SKIP_WITHOUT_GPU();
  enum { N = 200 };
  static const eng_dtype_t dts[] = {ENG_F32, ENG_BF16, ENG_F16, ENG_F32};
  list_t l = list_rand(N, dts, 4, 500, -2, 2);
  /* a transposed member */
  int64_t s2[2] = {67, 129};
  pair_release(l.t[3]);
  l.t[3] = transpose_pair(pair_rand(s2, 2, ENG_F32, 77, -2, 2), 0, 1);
  eng_tensor_t *c[N], *g[N], *rc = NULL, *r1 = NULL, *r2 = NULL;
  side(&l, 0, c), side(&l, 1, g);
  T_OK(eng_op_sum_squares(c, N, &rc));
  T_OK(eng_op_sum_squares(g, N, &r1));
  T_OK(eng_op_sum_squares(g, N, &r2));
  double want, a, b;
  T_OK(eng_tensor_to_f64(rc, &want));
  T_OK(eng_tensor_to_f64(r1, &a));
  T_OK(eng_tensor_to_f64(r2, &b));
  cr_assert(fabs(a - want) <= 1e-6 * want, "sum_squares on cuda %.9g, cpu %.9g", a, want);
  cr_assert(a == b, "sum_squares on cuda is not deterministic: %.17g then %.17g", a, b);
  /* f64 inputs: an f64 result, as exact as the CPU's up to summation order */
  eng_tensor_t *dc = NULL, *dg = NULL;
  int64_t big = 300001;
  pair_t d = pair_rand(&big, 1, ENG_F64, 9, -1, 1);
  T_OK(eng_op_sum_squares(&d.c, 1, &dc));
  T_OK(eng_op_sum_squares(&d.g, 1, &dg));
  cr_assert(dg->dtype == ENG_F64);
  T_OK(eng_tensor_to_f64(dc, &want));
  T_OK(eng_tensor_to_f64(dg, &a));
  cr_assert(fabs(a - want) <= 1e-12 * want, "f64 sum_squares on cuda %.17g, cpu %.17g", a, want);
  eng_tensor_release(rc), eng_tensor_release(r1), eng_tensor_release(r2);
  eng_tensor_release(dc), eng_tensor_release(dg);
  pair_release(d);
  list_release(l);
}

/* Gradient clipping without a host sync: scale = min(1, 0.5 / norm) stays on the device. */
Test(cuda_optim, scale_long_list_by_device_scalar) {
  SKIP_WITHOUT_GPU();
  enum { N = 170 };
  static const eng_dtype_t dts[] = {ENG_F32, ENG_BF16, ENG_F64, ENG_F16};
  list_t l = list_rand(N, dts, 4, 700, -2, 2);
  double sv = 0.3125;
  int64_t one = 1;
  pair_t s = pair_values(&sv, &one, 1, ENG_F32);
  eng_tensor_t *c[N], *g[N];
  side(&l, 0, c), side(&l, 1, g);
  T_OK(eng_op_scale_(c, N, s.c));
  T_OK(eng_op_scale_(g, N, s.g));
  expect_list(&l, "scale_");
  pair_release(s);
  list_release(l);
}

/* The backward of a byte-level embedding: V = 256 rows, 4097 ids (heavy repetition), D = 67. */
Test(cuda_optim, index_add_embedding_backward) {
  SKIP_WITHOUT_GPU();
  static const eng_dtype_t dts[] = {ENG_F32, ENG_BF16, ENG_F64, ENG_F16};
  int64_t V = 256, n = 4097, D = 67, bshape[2] = {V, D}, sshape[2] = {n, D};
  double *ids = malloc(sizeof(double) * (size_t)n);
  t_random(ids, n, 42, 0, (double)V);
  for (int64_t i = 0; i < n; i++) ids[i] = floor(ids[i]);
  for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
    pair_t base = pair_rand(bshape, 2, dts[k], 1 + k, -1, 1), src = pair_rand(sshape, 2, dts[k], 5 + k, -1, 1);
    pair_t idx = pair_values(ids, &n, 1, k % 2 ? ENG_I32 : ENG_I64);
    eng_tensor_t *want = NULL;
    T_OK(eng_op_index_add(base.c, 0, idx.c, src.c, &want));
    eng_tensor_t *in[3] = {base.g, idx.g, src.g};
    eng_op_call_t call = {.id = ENG_OP_INDEX_ADD, .n_in = 3, .in = in};
    call.attrs.i[0] = 0;
    call.attrs.ni = 1;
    expect_call(&call, want, "index_add [256,67] <- [4097,67]");
    eng_tensor_release(want);
    pair_release(base), pair_release(src), pair_release(idx);
  }
  free(ids);
}

/* scatter_add on a strided src and index along the last dim, f32 and i64 (exact). */
Test(cuda_optim, scatter_add_strided_last_dim) {
  SKIP_WITHOUT_GPU();
  static const eng_dtype_t dts[] = {ENG_F32, ENG_I64};
  int64_t bshape[3] = {3, 5, 300}, tshape[3] = {3, 700, 5};
  for (size_t k = 0; k < 2; k++) {
    pair_t base = pair_rand(bshape, 3, dts[k], 11 + k, -20, 20);
    pair_t src = transpose_pair(pair_rand(tshape, 3, dts[k], 13 + k, -20, 20), 1, 2); /* [3,5,700] */
    int64_t n = 3 * 700 * 5;
    double *iv = malloc(sizeof(double) * (size_t)n);
    t_random(iv, n, 17, 0, 300);
    for (int64_t i = 0; i < n; i++) iv[i] = floor(iv[i]);
    pair_t idx = transpose_pair(pair_values(iv, tshape, 3, ENG_I64), 1, 2);
    free(iv);
    eng_tensor_t *want = NULL;
    T_OK(eng_op_scatter_add(base.c, -1, idx.c, src.c, &want));
    eng_tensor_t *in[3] = {base.g, idx.g, src.g};
    eng_op_call_t call = {.id = ENG_OP_SCATTER_ADD, .n_in = 3, .in = in};
    call.attrs.i[0] = 2;
    call.attrs.ni = 1;
    expect_call(&call, want, "scatter_add along the last dim");
    eng_tensor_release(want);
    pair_release(base), pair_release(src), pair_release(idx);
  }
}

/* An index out of range is the CPU's error, with the same message. */
Test(cuda_optim, scatter_bounds_are_checked) {
  SKIP_WITHOUT_GPU();
  int64_t bshape[2] = {4, 3}, n = 5, sshape[2] = {5, 3};
  double iv[5] = {0, 3, 4, 1, 2};
  pair_t base = pair_rand(bshape, 2, ENG_F32, 1, -1, 1), src = pair_rand(sshape, 2, ENG_F32, 2, -1, 1);
  pair_t idx = pair_values(iv, &n, 1, ENG_I32);
  eng_tensor_t *out = NULL;
  T_FAILS(eng_op_index_add(base.c, 0, idx.c, src.c, &out), ENG_ERR_INDEX,
          "index_add: index 4 out of range for dim 0 of size 4");
  T_FAILS(eng_op_index_add(base.g, 0, idx.g, src.g, &out), ENG_ERR_INDEX,
          "index_add: index 4 out of range for dim 0 of size 4");
  cr_assert(out == NULL);
  pair_release(base), pair_release(src), pair_release(idx);
}
