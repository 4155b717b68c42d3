/* The backward kernels (softmax_backward, rms/layer_norm_backward, cross_entropy_backward) and
 * add_rms_norm on CUDA against the CPU reference, every output checked (gx, gw, gb, glogits, y,
 * residual_out), each written into a NaN-poisoned preset output: row lengths that reach the
 * 8-element chunk loops and the scalar ones (odd and misaligned rows), short and long rows (a
 * partial-sum row in shared memory and, past 40 KiB, in the workspace), many and few rows, the
 * LM's dtype mixes (bf16 gradients against the f32 residual stream), strided inputs, bit-for-bit
 * reproducible parameter gradients, and cross_entropy_backward captured in a CUDA graph with
 * gloss changed on the device between replays. */
#include "cuda_numeric.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static const eng_dtype_t FLOATS[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};
#define NFLOATS 4

/* (rows, d), d >= 3: rows of one or two elements are pure cancellation (the layer-norm gradient
 * is then exactly 0, the RMS-norm one a difference of near-equal terms), where each backend returns
 * its own rounding noise. Chunked and scalar loops, one warp to 1024 threads, 1 to many rows per
 * block, and layer-norm partial rows past 40 KiB (d = 6151 in f32 and f64, 12289). */
static const int64_t ROWS[][2] = {{1, 3},    {7, 7},     {33, 64},  {1023, 256}, {5, 1023},
                                  {9, 1024}, {130, 4096}, {3, 4097}, {17, 6151},  {4, 12289}};
#define NROWS (int)(sizeof ROWS / sizeof ROWS[0])

/* Runs call (inputs on the GPU) into n poisoned outputs shaped like the CPU results want[] and
 * compares each (expect_close releases the GPU outputs). */
static void expect_outputs(eng_op_call_t *call, eng_tensor_t *const *want, int n, const char *what) {
  call->n_out = n;
  for (int k = 0; k < n; k++) call->out[k] = poisoned(want[k]->shape, want[k]->ndim, want[k]->dtype, GPU0);
  eng_status_t st = eng_op_dispatch(call);
  cr_assert(st == ENG_OK, "%s on cuda failed: %s", what, eng_last_error());
  cr_assert_eq(call->n_out, n, "%s: %d outputs, want %d", what, call->n_out, n);
  for (int k = 0; k < n; k++) {
    char msg[320];
    snprintf(msg, sizeof msg, "%s, output %d", what, k);
    expect_close(call->out[k], want[k], msg);
  }
}

/* ---------------- rms_norm_backward, layer_norm_backward ---------------- */

/* gy, x, w, b given as pairs (w, b may be NULL); eps fixed per op. */
static void check_norm_backward(int layer, pair_t gy, pair_t x, const pair_t *w, const pair_t *b,
                                const char *what) {
  const double eps = layer ? 1e-5 : 1e-6;
  eng_tensor_t *want[3] = {NULL, NULL, NULL}, *gw = NULL, *gb = NULL;
  if (layer)
    T_OK(eng_op_layer_norm_backward(gy.c, x.c, w ? w->c : NULL, b ? b->c : NULL, eps, &want[0],
                                    &gw, &gb));
  else
    T_OK(eng_op_rms_norm_backward(gy.c, x.c, w ? w->c : NULL, eps, &want[0], &gw));
  int n = 1;
  if (gw) want[n++] = gw;
  if (gb) want[n++] = gb;
  eng_tensor_t *in[4] = {gy.g, x.g, w ? w->g : NULL, b ? b->g : NULL};
  eng_op_call_t call = {.id = layer ? ENG_OP_LAYER_NORM_BACKWARD : ENG_OP_RMS_NORM_BACKWARD,
                        .n_in = layer ? 4 : 3, .in = in};
  call.attrs.f[0] = eps;
  char msg[256], s[ENG_MAX_DIMS * 24];
  snprintf(msg, sizeof msg, "%s gy %s x %s %s w %s b %s (%s)",
           layer ? "layer_norm_backward" : "rms_norm_backward", eng_dtype_name(gy.c->dtype),
           eng_dtype_name(x.c->dtype), ENG_SHAPE_STR(x.c, s), w ? eng_dtype_name(w->c->dtype) : "none",
           b ? eng_dtype_name(b->c->dtype) : "none", what);
  expect_outputs(&call, want, n, msg);
  for (int k = 0; k < n; k++) eng_tensor_release(want[k]);
}

/* One shape and dtype mix, with all weight/bias combinations. */
static void check_norm_case(int64_t rows, int64_t d, eng_dtype_t gdt, eng_dtype_t xdt,
                            eng_dtype_t wdt, uint64_t seed) {
  pair_t gy = pair_rand(SHAPE(rows, d), gdt, seed, -1, 1);
  pair_t x = pair_rand(SHAPE(rows, d), xdt, seed + 1, -2, 3);
  pair_t w = pair_rand(SHAPE(d), wdt, seed + 2, 0.5, 1.5);
  pair_t b = pair_rand(SHAPE(d), wdt, seed + 3, -1, 1);
  check_norm_backward(0, gy, x, &w, NULL, "w");
  check_norm_backward(0, gy, x, NULL, NULL, "no w");
  if (d > 1) { /* layer norm of one element is 0 whatever x: its gx is rounding noise */
    check_norm_backward(1, gy, x, &w, &b, "w, b");
    check_norm_backward(1, gy, x, NULL, &b, "b only");
    check_norm_backward(1, gy, x, &w, NULL, "w only");
  }
  pair_release(gy);
  pair_release(x);
  pair_release(w);
  pair_release(b);
}

Test(cuda_norm_backward, rows_and_dtypes) {
  SKIP_WITHOUT_GPU();
  for (int r = 0; r < NROWS; r++) {
    for (int k = 0; k < NFLOATS; k++)
      check_norm_case(ROWS[r][0], ROWS[r][1], FLOATS[k], FLOATS[k], FLOATS[k], 100 + (uint64_t)r * 8);
    check_norm_case(ROWS[r][0], ROWS[r][1], ENG_BF16, ENG_F32, ENG_BF16, 200 + (uint64_t)r * 8);
    check_norm_case(ROWS[r][0], ROWS[r][1], ENG_F16, ENG_F32, ENG_F32, 300 + (uint64_t)r * 8);
    /* a pair the kernels do not take directly: gy is converted to x's dtype first */
    check_norm_case(ROWS[r][0], ROWS[r][1], ENG_F32, ENG_BF16, ENG_F16, 400 + (uint64_t)r * 8);
  }
}

/* Many rows (hundreds per block), transposed and misaligned inputs. */
Test(cuda_norm_backward, many_rows_and_views) {
  SKIP_WITHOUT_GPU();
  check_norm_case(8192, 512, ENG_BF16, ENG_F32, ENG_F32, 500);
  pair_t gy = transpose_pair(pair_rand(SHAPE(48, 40), ENG_F32, 510, -1, 1), 0, 1);
  pair_t x = transpose_pair(pair_rand(SHAPE(48, 40), ENG_F32, 511, -2, 2), 0, 1);
  pair_t w = slice_pair(pair_rand(SHAPE(96), ENG_F32, 512, 0.5, 1.5), 0, 0, 96, 2);
  check_norm_backward(0, gy, x, &w, NULL, "transposed");
  check_norm_backward(1, gy, x, &w, &w, "transposed");
  pair_release(gy);
  pair_release(x);
  pair_release(w);
  /* rows starting one element past a 16-byte boundary */
  pair_t flat = pair_rand(SHAPE(7 * 64 + 1), ENG_BF16, 513, -1, 1);
  pair_t tail = pair_narrow(flat, 0, 1, 7 * 64);
  pair_t gm = pair_view(tail, SHAPE(7, 64));
  pair_t xm = pair_rand(SHAPE(7, 64), ENG_BF16, 514, -2, 2);
  check_norm_backward(1, gm, xm, NULL, NULL, "misaligned gy");
  pair_release(flat);
  pair_release(tail);
  pair_release(gm);
  pair_release(xm);
}

/* The same inputs give the same bits: no atomics in the sums over rows. */
Test(cuda_norm_backward, reproducible_parameter_gradients) {
  SKIP_WITHOUT_GPU();
  pair_t gy = pair_rand(SHAPE(4099, 768), ENG_BF16, 520, -1, 1);
  pair_t x = pair_rand(SHAPE(4099, 768), ENG_F32, 521, -2, 2);
  pair_t w = pair_rand(SHAPE(768), ENG_F32, 522, 0.5, 1.5);
  eng_tensor_t *gx[2], *gw[2], *gb[2];
  for (int run = 0; run < 2; run++)
    T_OK(eng_op_layer_norm_backward(gy.g, x.g, w.g, w.g, 1e-5, &gx[run], &gw[run], &gb[run]));
  eng_tensor_t *gw0 = NULL, *gb0 = NULL;
  T_OK(eng_tensor_to_device(gw[0], ENG_CPU_DEVICE, &gw0));
  T_OK(eng_tensor_to_device(gb[0], ENG_CPU_DEVICE, &gb0));
  expect_same_bits(gw[1], gw0, "gw of a second run");
  expect_same_bits(gb[1], gb0, "gb of a second run");
  eng_tensor_release(gw0);
  eng_tensor_release(gb0);
  eng_tensor_t *all[] = {gx[0], gx[1], gw[0], gw[1], gb[0], gb[1]};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) eng_tensor_release(all[k]);
  pair_release(gy);
  pair_release(x);
  pair_release(w);
}

/* ---------------- softmax_backward ---------------- */

static void check_softmax_backward(pair_t gy, pair_t y, int64_t dim, int log, const char *what) {
  eng_tensor_t *want = NULL;
  T_OK(eng_op_softmax_backward(gy.c, y.c, dim, log, &want));
  eng_tensor_t *in[2] = {gy.g, y.g};
  eng_op_call_t call = {.id = ENG_OP_SOFTMAX_BACKWARD, .n_in = 2, .in = in};
  int d;
  T_OK(eng_dim_wrap("softmax_backward", dim, y.g->ndim ? y.g->ndim : 1, &d));
  call.attrs.i[0] = d;
  call.attrs.i[1] = log;
  call.attrs.ni = 2;
  char msg[256], s[ENG_MAX_DIMS * 24];
  snprintf(msg, sizeof msg, "%s of %s %s %s (dim %lld)", log ? "log_softmax_backward" : "softmax_backward",
           eng_dtype_name(y.c->dtype), ENG_SHAPE_STR(y.c, s), what, (long long)dim);
  expect_outputs(&call, &want, 1, msg);
  eng_tensor_release(want);
}

Test(cuda_softmax_backward, rows_dims_and_views) {
  SKIP_WITHOUT_GPU();
  for (int k = 0; k < NFLOATS; k++)
    for (int log = 0; log < 2; log++) {
      for (int r = 0; r < NROWS; r++) {
        pair_t x = pair_rand(SHAPE(ROWS[r][0], ROWS[r][1]), FLOATS[k], 600 + (uint64_t)r, -4, 4);
        pair_t gy = pair_rand(SHAPE(ROWS[r][0], ROWS[r][1]), FLOATS[k], 650 + (uint64_t)r, -1, 1);
        eng_tensor_t *yc = NULL;
        T_OK(log ? eng_op_log_softmax(x.c, 1, &yc) : eng_op_softmax(x.c, 1, &yc));
        pair_t y = pair_of(yc);
        check_softmax_backward(gy, y, -1, log, "rows");
        check_softmax_backward(gy, y, 0, log, "columns");
        pair_t gt = pair_transpose(gy, 0, 1), yt = pair_transpose(y, 0, 1);
        check_softmax_backward(gt, yt, 1, log, "transposed");
        pair_release(gt);
        pair_release(yt);
        pair_release(x);
        pair_release(gy);
        pair_release(y);
      }
      pair_t g3 = pair_rand(SHAPE(3, 1023, 5), FLOATS[k], 700, -1, 1);
      pair_t y3 = pair_rand(SHAPE(3, 1023, 5), FLOATS[k], 701, 0, 0.01);
      check_softmax_backward(g3, y3, 1, log, "middle dim");
      pair_release(g3);
      pair_release(y3);
      static const int64_t one[1] = {1};
      pair_t g0 = pair_rand(one, 0, FLOATS[k], 702, -1, 1), y0 = pair_rand(one, 0, FLOATS[k], 703, 0, 1);
      check_softmax_backward(g0, y0, 0, log, "0-d");
      pair_release(g0);
      pair_release(y0);
    }
}

/* ---------------- cross_entropy_backward ---------------- */

/* Integer targets in [0, c), every `ignore_every`-th one ignore_index. */
static pair_t targets_of(int64_t rows, int64_t c, eng_dtype_t dt, uint64_t seed, int ignore_every,
                         int64_t ignore) {
  double *v = malloc(sizeof(double) * (size_t)rows);
  t_random(v, rows, seed, 0, 1);
  for (int64_t r = 0; r < rows; r++)
    v[r] = ignore_every && r % ignore_every == 1 ? (double)ignore : floor(v[r] * (double)c);
  pair_t p = pair_values(v, SHAPE(rows), dt);
  free(v);
  return p;
}

static void check_ce_backward(pair_t x, pair_t t, pair_t gloss, int64_t ignore, const char *what) {
  eng_tensor_t *want = NULL;
  T_OK(eng_op_cross_entropy_backward(x.c, t.c, gloss.c, ignore, &want));
  eng_tensor_t *in[3] = {x.g, t.g, gloss.g};
  eng_op_call_t call = {.id = ENG_OP_CROSS_ENTROPY_BACKWARD, .n_in = 3, .in = in};
  call.attrs.i[0] = ignore;
  call.attrs.ni = 1;
  char msg[256], s[ENG_MAX_DIMS * 24];
  snprintf(msg, sizeof msg, "cross_entropy_backward of %s %s, targets %s, gloss %s (%s)",
           eng_dtype_name(x.c->dtype), ENG_SHAPE_STR(x.c, s), eng_dtype_name(t.c->dtype),
           eng_dtype_name(gloss.c->dtype), what);
  expect_outputs(&call, &want, 1, msg);
  eng_tensor_release(want);
}

Test(cuda_cross_entropy_backward, classes_and_dtypes) {
  SKIP_WITHOUT_GPU();
  static const int64_t shapes[][2] = {{1, 5}, {33, 7}, {1023, 256}, {7, 1023}, {5, 4097}, {3, 50257}};
  static const eng_dtype_t tdts[] = {ENG_I64, ENG_I32, ENG_U8};
  double g = 0.75;
  pair_t gl = pair_values(&g, SHAPE(1), ENG_F32);
  pair_t gl_bf = pair_values(&g, SHAPE(1), ENG_BF16);
  for (int k = 0; k < NFLOATS; k++)
    for (int s = 0; s < 6; s++) {
      const int64_t rows = shapes[s][0], c = shapes[s][1];
      pair_t x = pair_rand(SHAPE(rows, c), FLOATS[k], 800 + (uint64_t)s, -5, 5);
      eng_dtype_t tdt = tdts[s % 3] == ENG_U8 && c > 255 ? ENG_I32 : tdts[s % 3];
      pair_t t = targets_of(rows, c, tdt, 810 + (uint64_t)s, 4, -100);
      check_ce_backward(x, t, s % 2 ? gl : gl_bf, -100, "some ignored");
      pair_t odd = targets_of(rows, c, ENG_I64, 820, 2, 3); /* odd rows ignored with index 3 */
      check_ce_backward(x, odd, gl, 3, "ignore_index 3");
      pair_release(odd);
      pair_release(t);
      pair_release(x);
    }
  pair_release(gl);
  pair_release(gl_bf);
}

/* Captured in a graph: gloss and n_valid are read on the device, so a replay after gloss changed
 * on the device gives the new gradient. */
Test(cuda_cross_entropy_backward, captured_in_a_graph) {
  SKIP_WITHOUT_GPU();
  pair_t x = pair_rand(SHAPE(65, 256), ENG_BF16, 900, -4, 4);
  pair_t t = targets_of(65, 256, ENG_I64, 901, 5, -100);
  double g1 = 1.5, g2 = -0.25;
  pair_t gl = pair_values(&g1, SHAPE(1), ENG_F32);
  eng_tensor_t *out = poisoned(SHAPE(65, 256), ENG_BF16, GPU0);
  eng_tensor_t *in[3] = {x.g, t.g, gl.g};
  eng_op_call_t call = {.id = ENG_OP_CROSS_ENTROPY_BACKWARD, .n_in = 3, .in = in, .n_out = 1,
                        .out = {out}};
  call.attrs.i[0] = -100;
  call.attrs.ni = 1;
  eng_cuda_graph_t *graph = NULL;
  T_OK(eng_cuda_graph_begin(0, &graph));
  eng_status_t st = eng_op_dispatch(&call);
  T_OK(eng_cuda_graph_end(&graph));
  cr_assert(!st, "cross_entropy_backward during capture failed: %s", eng_last_error());
  eng_tensor_t *g2c = t_tensor(&g2, SHAPE(1), ENG_F32);
  T_OK(eng_tensor_copy_(gl.g, g2c)); /* gloss changes on the device after capture */
  T_OK(eng_cuda_graph_replay(graph));
  T_OK(eng_cuda_synchronize(0));
  eng_tensor_t *want = NULL;
  T_OK(eng_op_cross_entropy_backward(x.c, t.c, g2c, -100, &want));
  eng_tensor_retain(out);
  expect_close(out, want, "cross_entropy_backward replayed with a new gloss");
  eng_tensor_release(want);
  eng_tensor_release(g2c);
  eng_tensor_release(out);
  eng_cuda_graph_free(graph);
  pair_release(x);
  pair_release(t);
  pair_release(gl);
}

/* ---------------- add_rms_norm ---------------- */

static void check_add_rms_norm(pair_t x, const pair_t *res, const pair_t *w, const char *what) {
  eng_tensor_t *want[2] = {NULL, NULL};
  T_OK(eng_op_add_rms_norm(x.c, res ? res->c : NULL, w ? w->c : NULL, 1e-6, &want[0], &want[1]));
  eng_tensor_t *in[3] = {x.g, res ? res->g : NULL, w ? w->g : NULL};
  eng_op_call_t call = {.id = ENG_OP_ADD_RMS_NORM, .n_in = 3, .in = in};
  call.attrs.f[0] = 1e-6;
  char msg[256], s[ENG_MAX_DIMS * 24];
  snprintf(msg, sizeof msg, "add_rms_norm x %s %s residual %s w %s (%s)", eng_dtype_name(x.c->dtype),
           ENG_SHAPE_STR(x.c, s), res ? eng_dtype_name(res->c->dtype) : "none",
           w ? eng_dtype_name(w->c->dtype) : "none", what);
  expect_outputs(&call, want, 2, msg);
  eng_tensor_release(want[0]);
  eng_tensor_release(want[1]);
}

Test(cuda_add_rms_norm, rows_and_dtypes) {
  SKIP_WITHOUT_GPU();
  for (int r = 0; r < NROWS; r++)
    for (int k = 0; k < NFLOATS; k++) {
      const int64_t rows = ROWS[r][0], d = ROWS[r][1];
      const uint64_t seed = 1000 + (uint64_t)r * 16 + (uint64_t)k * 4;
      pair_t x = pair_rand(SHAPE(rows, d), FLOATS[k], seed, -2, 2);
      pair_t rf = pair_rand(SHAPE(rows, d), ENG_F32, seed + 1, -3, 3);
      pair_t rs = pair_rand(SHAPE(rows, d), FLOATS[k], seed + 2, -3, 3);
      pair_t w = pair_rand(SHAPE(d), ENG_BF16, seed + 3, 0.5, 1.5);
      check_add_rms_norm(x, &rf, &w, "f32 residual");
      check_add_rms_norm(x, &rs, &w, "residual of x's dtype");
      check_add_rms_norm(x, NULL, &w, "no residual");
      check_add_rms_norm(x, &rf, NULL, "no weight");
      pair_release(x);
      pair_release(rf);
      pair_release(rs);
      pair_release(w);
    }
  pair_t x = transpose_pair(pair_rand(SHAPE(40, 24), ENG_BF16, 1300, -2, 2), 0, 1);
  pair_t res = pair_rand(SHAPE(24, 40), ENG_F64, 1301, -2, 2);
  check_add_rms_norm(x, &res, NULL, "transposed x, f64 residual");
  pair_release(x);
  pair_release(res);
}
