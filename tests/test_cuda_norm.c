/* softmax, log_softmax, layer_norm, rms_norm and cross_entropy on CUDA against the CPU
 * reference: fresh random inputs, poisoned outputs, row lengths that reach every kernel variant
 * (a warp or a block per row, registers or streaming, 16-byte or scalar loads: 1, 7, 1023, 4097
 * and the powers of two around each threshold), odd row counts, softmax along every dim,
 * strided and misaligned inputs, extreme values (huge, -inf, NaN), and cross-entropy's ignored
 * and out-of-range targets, inside and outside graph capture. */
#include "cuda_numeric.h"

static const eng_dtype_t FLOATS[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};
#define NFLOATS 4
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* (rows, row length) pairs: with 16-byte vectors of 2 (f64), 4 (f32) or 8 (f16/bf16) elements the
 * kernels switch at 32, 128, 1024 and 4096 vectors a row; odd lengths take the scalar paths. */
static const int64_t ROWS[][2] = {
    {1, 1},    {1023, 1}, {7, 7},     {1023, 7},  {33, 64},   {7, 128},   {5, 256},
    {1023, 1023}, {7, 1024}, {3, 2048}, {9, 4096}, {7, 4097}, {3, 8192}, {2, 16384},
    {2, 32768}, {2, 40000}, {1, 70001},
};
#define NROWS (int)(sizeof ROWS / sizeof ROWS[0])

/* ---------------- softmax ---------------- */

static void check_softmax(pair_t x, int64_t dim, int log_out, const char *what) {
  eng_tensor_t *want = NULL;
  T_OK(log_out ? eng_op_log_softmax(x.c, dim, &want) : eng_op_softmax(x.c, dim, &want));
  eng_tensor_t *in[1] = {x.g};
  eng_op_call_t call = {.id = log_out ? ENG_OP_LOG_SOFTMAX : ENG_OP_SOFTMAX, .n_in = 1, .in = in};
  int d;
  T_OK(eng_dim_wrap("softmax", dim, x.g->ndim ? x.g->ndim : 1, &d));
  call.attrs.i[0] = d;
  call.attrs.ni = 1;
  char msg[256], s[ENG_MAX_DIMS * 24];
  snprintf(msg, sizeof msg, "%s of %s %s %s (dim %lld)", log_out ? "log_softmax" : "softmax",
           eng_dtype_name(x.c->dtype), ENG_SHAPE_STR(x.c, s), what, (long long)dim);
  expect_call(&call, want, msg);
  eng_tensor_release(want);
}

/* The same rows, starting one element past a 16-byte boundary: the scalar paths at every size. */
static pair_t misaligned_rows(int64_t rows, int64_t n, eng_dtype_t dt, uint64_t seed, double lo,
                              double hi) {
  pair_t flat = pair_rand(SHAPE(rows * n + 1), dt, seed, lo, hi);
  pair_t tail = pair_narrow(flat, 0, 1, rows * n);
  pair_t x = pair_view(tail, SHAPE(rows, n));
  pair_release(flat);
  pair_release(tail);
  return x;
}

Test(cuda_softmax, rows) {
  SKIP_WITHOUT_GPU();
  for (int k = 0; k < NFLOATS; k++)
    for (int r = 0; r < NROWS; r++) {
      pair_t x = pair_rand(SHAPE(ROWS[r][0], ROWS[r][1]), FLOATS[k], 10 + r, -8, 8);
      check_softmax(x, -1, 0, "rows");
      check_softmax(x, 1, 1, "rows");
      pair_release(x);
      pair_t m = misaligned_rows(ROWS[r][0], ROWS[r][1], FLOATS[k], 40 + r, -8, 8);
      check_softmax(m, -1, 0, "misaligned rows");
      check_softmax(m, -1, 1, "misaligned rows");
      pair_release(m);
    }
}

/* Along a leading or middle dim (one thread per column), and over views. */
Test(cuda_softmax, other_dims_and_views) {
  SKIP_WITHOUT_GPU();
  static const int64_t lens[] = {1, 7, 1023, 4097}, inners[] = {7, 33};
  for (int k = 0; k < NFLOATS; k++)
    for (int lg = 0; lg < 2; lg++) {
      for (int l = 0; l < 4; l++)
        for (int i = 0; i < 2; i++) {
          pair_t x = pair_rand(SHAPE(lens[l], inners[i]), FLOATS[k], 60 + l * 2 + i, -8, 8);
          check_softmax(x, 0, lg, "first dim");
          pair_release(x);
          pair_t y = pair_rand(SHAPE(7, lens[l], inners[i]), FLOATS[k], 70 + l * 2 + i, -8, 8);
          check_softmax(y, 1, lg, "middle dim");
          pair_t t = pair_transpose(y, 1, 2);
          check_softmax(t, -1, lg, "transposed");
          check_softmax(t, 0, lg, "transposed");
          pair_release(t);
          pair_release(y);
        }
      static const int64_t one[1] = {1};
      pair_t s = pair_rand(one, 0, FLOATS[k], 80, -8, 8);
      check_softmax(s, 0, lg, "0-d");
      pair_release(s);
      pair_t c = pair_rand(SHAPE(7, 1), FLOATS[k], 81, -8, 8);
      check_softmax(c, 1, lg, "[7,1]");
      check_softmax(c, 0, lg, "[7,1]");
      pair_release(c);
    }
}

/* Huge logits (the max is subtracted), -inf entries (exp gives 0), a NaN (its line is NaN), a line
 * of -inf only (NaN, as on the CPU), in rows held in registers and in streamed rows. */
Test(cuda_softmax, extreme_values) {
  SKIP_WITHOUT_GPU();
  static const int64_t lens[] = {7, 1024, 40000};
  static const eng_dtype_t dts[] = {ENG_F32, ENG_BF16, ENG_F64};
  for (int k = 0; k < 3; k++)
    for (int l = 0; l < 3; l++) {
      const int64_t n = lens[l];
      eng_tensor_t *c = t_rand_tensor(SHAPE(4, n), dts[k], 90 + l, -8, 8);
      void *v = eng_tensor_data(c);
      eng_store_f64(v, dts[k], 0 * n + n / 2, 1000); /* row 0: one huge logit */
      eng_store_f64(v, dts[k], 0 * n + 0, 999);
      for (int64_t j = 0; j < n; j += 2) eng_store_f64(v, dts[k], 1 * n + j, -INFINITY);
      eng_store_f64(v, dts[k], 2 * n + n - 1, NAN);
      for (int64_t j = 0; j < n; j++) eng_store_f64(v, dts[k], 3 * n + j, -INFINITY);
      pair_t x = pair_of(c);
      check_softmax(x, 1, 0, "extreme values");
      check_softmax(x, 1, 1, "extreme values");
      pair_t t = pair_transpose(x, 0, 1);
      check_softmax(t, 0, 0, "extreme values along columns");
      check_softmax(t, 0, 1, "extreme values along columns");
      pair_release(t);
      pair_release(x);
    }
}

/* ---------------- layer_norm, rms_norm ---------------- */

/* layer_norm (layer) or rms_norm of x with optional weight and bias (NULL pairs are left out). */
static void check_norm(int layer, pair_t x, const pair_t *w, const pair_t *b, double eps,
                       const char *what) {
  eng_tensor_t *want = NULL;
  if (layer)
    T_OK(eng_op_layer_norm(x.c, w ? w->c : NULL, b ? b->c : NULL, eps, &want));
  else
    T_OK(eng_op_rms_norm(x.c, w ? w->c : NULL, eps, &want));
  eng_tensor_t *in[3] = {x.g, w ? w->g : NULL, b ? b->g : NULL};
  eng_op_call_t call = {.id = layer ? ENG_OP_LAYER_NORM : ENG_OP_RMS_NORM, .n_in = layer ? 3 : 2,
                        .in = in};
  call.attrs.f[0] = eps;
  char msg[256], s[ENG_MAX_DIMS * 24];
  snprintf(msg, sizeof msg, "%s of %s %s %s (weight %d, bias %d)", layer ? "layer_norm" : "rms_norm",
           eng_dtype_name(x.c->dtype), ENG_SHAPE_STR(x.c, s), what, w != NULL, b != NULL);
  expect_call(&call, want, msg);
  eng_tensor_release(want);
}

/* Both norms with weight and bias, weight only, and neither. */
static void check_norms(pair_t x, const pair_t *w, const pair_t *b, const char *what) {
  check_norm(1, x, w, b, 1e-5, what);
  check_norm(1, x, w, NULL, 1e-5, what);
  check_norm(1, x, NULL, NULL, 1e-3, what);
  check_norm(0, x, w, NULL, 1e-6, what);
  check_norm(0, x, NULL, NULL, 1e-5, what);
}

Test(cuda_norm, rows) {
  SKIP_WITHOUT_GPU();
  for (int k = 0; k < NFLOATS; k++)
    for (int r = 0; r < NROWS; r++) {
      const int64_t rows = ROWS[r][0], d = ROWS[r][1];
      pair_t x = pair_rand(SHAPE(rows, d), FLOATS[k], 100 + r, -2, 4);
      pair_t w = pair_rand(SHAPE(d), FLOATS[k], 130 + r, 0.5, 1.5);
      pair_t b = pair_rand(SHAPE(d), FLOATS[k], 160 + r, -1, 1);
      check_norms(x, &w, &b, "rows");
      pair_release(x);
      pair_t m = misaligned_rows(rows, d, FLOATS[k], 190 + r, -2, 4);
      check_norms(m, &w, &b, "misaligned rows");
      pair_release(m);
      pair_release(w);
      pair_release(b);
    }
}

/* Strided x (made contiguous on the device), 3-d x, a weight that is a strided view and a bias
 * that starts off a 16-byte boundary. */
Test(cuda_norm, views) {
  SKIP_WITHOUT_GPU();
  static const int64_t ds[] = {7, 1023, 4096};
  for (int k = 0; k < NFLOATS; k++)
    for (int i = 0; i < 3; i++) {
      const int64_t d = ds[i];
      pair_t base = pair_rand(SHAPE(d, 33), FLOATS[k], 220 + i, -2, 4);
      pair_t x = pair_transpose(base, 0, 1); /* [33, d], strided */
      pair_t w2 = pair_rand(SHAPE(2 * d), FLOATS[k], 230 + i, 0.5, 1.5);
      pair_t w = pair_slice(w2, 0, 0, 2 * d, 2);
      pair_t b1 = pair_rand(SHAPE(d + 1), FLOATS[k], 240 + i, -1, 1);
      pair_t b = pair_narrow(b1, 0, 1, d);
      check_norms(x, &w, &b, "transposed x, strided weight, offset bias");
      pair_t x3 = pair_rand(SHAPE(3, 5, d), FLOATS[k], 250 + i, -2, 4);
      check_norms(x3, &w, &b, "3-d");
      pair_release(x3);
      pair_release(base);
      pair_release(x);
      pair_release(w2);
      pair_release(w);
      pair_release(b1);
      pair_release(b);
    }
}

/* ---------------- cross_entropy ---------------- */

/* Targets in [0, c) of dtype dt, every `every`-th of them ignore (every = 0: none). */
static pair_t targets(int64_t rows, int64_t c, eng_dtype_t dt, uint64_t seed, int every,
                      int64_t ignore) {
  double *v = malloc(sizeof(double) * (size_t)(rows ? rows : 1));
  t_random(v, rows, seed, 0, (double)c);
  for (int64_t i = 0; i < rows; i++) v[i] = every && i % every == 1 ? (double)ignore : floor(v[i]);
  pair_t t = pair_values(v, SHAPE(rows), dt);
  free(v);
  return t;
}

static void check_ce(pair_t x, pair_t t, int64_t ignore, const char *what) {
  eng_tensor_t *want = NULL;
  T_OK(eng_op_cross_entropy(x.c, t.c, ignore, &want));
  eng_tensor_t *in[2] = {x.g, t.g};
  eng_op_call_t call = {.id = ENG_OP_CROSS_ENTROPY, .n_in = 2, .in = in};
  call.attrs.i[0] = ignore;
  call.attrs.ni = 1;
  char msg[256], s[ENG_MAX_DIMS * 24];
  snprintf(msg, sizeof msg, "cross_entropy of %s %s, %s targets, %s", eng_dtype_name(x.c->dtype),
           ENG_SHAPE_STR(x.c, s), eng_dtype_name(t.c->dtype), what);
  expect_call(&call, want, msg);
  eng_tensor_release(want);
}

Test(cuda_cross_entropy, values) {
  SKIP_WITHOUT_GPU();
  static const int64_t rows[] = {1, 7, 1023}, classes[] = {1, 7, 256, 1023, 4097};
  for (int k = 0; k < NFLOATS; k++)
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 5; c++) {
        const int64_t n = rows[r], C = classes[c];
        pair_t x = pair_rand(SHAPE(n, C), FLOATS[k], 300 + r * 5 + c, -4, 4);
        pair_t t64 = targets(n, C, ENG_I64, 320 + c, 0, -100);
        pair_t t32 = targets(n, C, ENG_I32, 330 + c, 5, -100);
        check_ce(x, t64, -100, "all taking part");
        check_ce(x, t32, -100, "every 5th ignored");
        check_ce(x, t64, 0, "class 0 ignored");
        if (C <= 256) {
          pair_t t8 = targets(n, C, ENG_U8, 340 + c, 0, 0);
          check_ce(x, t8, -100, "u8 targets");
          pair_release(t8);
        }
        pair_release(x);
        pair_release(t64);
        pair_release(t32);
      }
  /* a vocabulary-sized row (a block per row) */
  pair_t x = pair_rand(SHAPE(7, 50001), ENG_BF16, 350, -4, 4);
  pair_t t = targets(7, 50001, ENG_I64, 351, 0, -100);
  check_ce(x, t, -100, "long rows");
  pair_release(x);
  pair_release(t);
}

Test(cuda_cross_entropy, views_ignored_and_empty) {
  SKIP_WITHOUT_GPU();
  for (int k = 0; k < NFLOATS; k++) {
    pair_t base = pair_rand(SHAPE(1023, 9), FLOATS[k], 360, -3, 3);
    pair_t x = pair_transpose(base, 0, 1); /* [9, 1023], strided */
    pair_t t2 = targets(20, 1023, ENG_I64, 361, 0, -100);
    pair_t t = pair_slice(t2, 0, 1, 19, 2); /* [9], strided */
    check_ce(x, t, -100, "strided logits and targets");
    pair_t x3 = pair_rand(SHAPE(2, 3, 11), FLOATS[k], 362, -4, 4);
    double tv[6] = {1, 10, -1, 0, 5, -1};
    pair_t t3 = pair_values(tv, SHAPE(2, 3), ENG_I32);
    check_ce(x3, t3, -1, "3-d logits");
    pair_t none = targets(9, 1023, ENG_I64, 363, 1, -100); /* every target ignored: NaN */
    check_ce(x, none, -100, "all ignored");
    pair_t e = pair_rand(SHAPE(0, 5), FLOATS[k], 364, -4, 4);
    pair_t te = targets(0, 5, ENG_I64, 365, 0, -100);
    check_ce(e, te, -100, "no rows");
    pair_release(base);
    pair_release(x);
    pair_release(t2);
    pair_release(t);
    pair_release(x3);
    pair_release(t3);
    pair_release(none);
    pair_release(e);
    pair_release(te);
  }
}

/* The CPU fails with ENG_ERR_INDEX and a message holding `needle`; CUDA must fail alike, with the
 * same message. */
static void expect_same_error(pair_t x, pair_t t, int64_t ignore, const char *needle) {
  eng_tensor_t *y = NULL;
  T_FAILS(eng_op_cross_entropy(x.c, t.c, ignore, &y), ENG_ERR_INDEX, needle);
  char cpu_msg[256];
  snprintf(cpu_msg, sizeof cpu_msg, "%s", eng_last_error());
  eng_status_t st = eng_op_cross_entropy(x.g, t.g, ignore, &y);
  cr_assert(st == ENG_ERR_INDEX && !y, "%s targets: CUDA gave status %d: %s",
            eng_dtype_name(t.c->dtype), (int)st, eng_last_error());
  cr_assert_str_eq(eng_last_error(), cpu_msg, "%s targets: the CUDA message differs",
                   eng_dtype_name(t.c->dtype));
}

/* Outside capture a bad target is the CPU's ENG_ERR_INDEX, message and all: the first bad row is
 * named, an ignored value is no error. */
Test(cuda_cross_entropy, out_of_range_targets) {
  SKIP_WITHOUT_GPU();
  pair_t x = pair_rand(SHAPE(1023, 5), ENG_F32, 370, -1, 1);
  static const eng_dtype_t tdts[] = {ENG_I64, ENG_I32, ENG_U8};
  for (int k = 0; k < 3; k++) {
    pair_t t = targets(1023, 5, tdts[k], 371 + k, 0, -100);
    eng_store_f64(eng_tensor_data(t.c), tdts[k], 900, 7);
    eng_store_f64(eng_tensor_data(t.c), tdts[k], 700, 9);
    pair_resync(&t);
    expect_same_error(x, t, -100, "cross_entropy: target 9 (at 700) is out of range for 5 classes");
    expect_same_error(x, t, 9, "cross_entropy: target 7 (at 900) is out of range for 5 classes");
    eng_store_f64(eng_tensor_data(t.c), tdts[k], 900, 9);
    pair_resync(&t);
    check_ce(x, t, 9, "bad values that are ignore_index");
    pair_release(t);
  }
  double neg[3] = {0, -3, 4};
  pair_t tn = pair_values(neg, SHAPE(3), ENG_I64);
  pair_t x3 = pair_narrow(x, 0, 0, 3);
  expect_same_error(x3, tn, -100, "cross_entropy: target -3 (at 1) is out of range for 5 classes");
  check_ce(x3, tn, -3, "ignored -3");
  pair_release(tn);
  pair_release(x3);
  pair_release(x);
}

/* Inside a capture nothing may read back: a bad target makes the loss NaN instead of an error,
 * and good targets give the right loss on replay. */
Test(cuda_cross_entropy, during_capture) {
  SKIP_WITHOUT_GPU();
  pair_t x = pair_rand(SHAPE(33, 11), ENG_F32, 380, -3, 3);
  pair_t good = targets(33, 11, ENG_I64, 381, 4, -100);
  pair_t bad = targets(33, 11, ENG_I64, 382, 0, -100);
  eng_store_f64(eng_tensor_data(bad.c), ENG_I64, 20, 11);
  pair_resync(&bad);
  eng_tensor_t *want = NULL;
  T_OK(eng_op_cross_entropy(x.c, good.c, -100, &want));
  static const int64_t one[1] = {1};
  eng_tensor_t *zero = NULL, *outs[2] = {NULL, NULL};
  T_OK(eng_tensor_zeros(one, 0, ENG_F32, ENG_CPU_DEVICE, &zero));
  T_OK(eng_tensor_to_device(zero, GPU0, &outs[0]));
  T_OK(eng_tensor_to_device(zero, GPU0, &outs[1]));
  eng_tensor_release(zero);
  eng_tensor_t *in_good[2] = {x.g, good.g}, *in_bad[2] = {x.g, bad.g};
  eng_op_call_t cg = {.id = ENG_OP_CROSS_ENTROPY, .n_in = 2, .in = in_good, .n_out = 1,
                      .out = {outs[0]}};
  eng_op_call_t cb = {.id = ENG_OP_CROSS_ENTROPY, .n_in = 2, .in = in_bad, .n_out = 1,
                      .out = {outs[1]}};
  cg.attrs.i[0] = cb.attrs.i[0] = -100;
  cg.attrs.ni = cb.attrs.ni = 1;
  eng_cuda_graph_t *graph = NULL;
  T_OK(eng_cuda_graph_begin(0, &graph));
  eng_status_t sg = eng_op_dispatch(&cg), sb = eng_op_dispatch(&cb);
  T_OK(eng_cuda_graph_end(&graph));
  cr_assert(!sg && !sb, "cross_entropy during capture failed: %s", eng_last_error());
  T_OK(eng_cuda_graph_replay(graph));
  T_OK(eng_cuda_synchronize(0));
  double got_bad;
  T_OK(eng_tensor_to_f64(outs[1], &got_bad));
  cr_assert(isnan(got_bad), "a bad target during capture gave %g, want NaN", got_bad);
  eng_tensor_release(outs[1]);
  expect_close(outs[0], want, "cross_entropy replayed from a graph");
  eng_tensor_release(want);
  eng_cuda_graph_free(graph);
  pair_release(x);
  pair_release(good);
  pair_release(bad);
}
