/* Elementwise ops on CUDA (unary, binary with broadcasting, clamp, where) against the CPU
 * reference: the same inputs (fresh random values, rounded once to the dtype) on both devices, the
 * GPU writing into an output poisoned beforehand, then every element compared (NaN where the CPU
 * has NaN) and the relative norm error bounded as the design sets. The layouts cover every kernel
 * path: contiguous (16-byte packs, with a misaligned head and a tail), a broadcast scalar, [N, D]
 * with a row or a column, strided views in 32-bit and in 64-bit index arithmetic. */
#include "cuda_numeric.h"

static const eng_dtype_t FLOATS[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};
#define NFLOATS 4
static const int64_t SIZES[] = {1, 7, 1023, 4097, 100003};
#define NSIZES 5
static const int64_t NO_DIMS[1] = {1}; /* the shape argument of 0-d tensors */

/* The pair_* views of cuda_numeric.h, taking the place of the pair they are made from. */
#define VIEW(p, fn, ...)                                                                           \
  do {                                                                                             \
    pair_t v_ = fn(p, __VA_ARGS__);                                                                \
    pair_release(p);                                                                               \
    p = v_;                                                                                        \
  } while (0)

/* ---- comparing ---- */

/* Per element: |gpu - cpu| <= rtol |cpu| + atol. The two sides compute the same formula with
 * different math libraries, so f32/f64 differ by a few ulps and f16/bf16 by at most one rounding
 * step; a wrong element is off by far more. */
static void elem_tol(eng_dtype_t dt, double *rtol, double *atol) {
  switch (dt) {
  case ENG_F64: *rtol = 1e-12, *atol = 1e-13; break;
  case ENG_F32: *rtol = 1e-5, *atol = 1e-6; break;
  case ENG_F16: *rtol = 2e-3, *atol = 1e-4; break;
  default: *rtol = 1e-2, *atol = 1e-4; break; /* bf16 */
  }
}

/* got (any device) against the CPU reference: same shape and dtype, then every element (integers
 * bit for bit; floats exactly when `exact`, else within elem_tol; NaN and Inf where the reference
 * has them), then the relative norm error when everything is finite. */
static void check_same(eng_tensor_t *got, eng_tensor_t *ref, int exact, const char *what) {
  cr_assert_eq(got->ndim, ref->ndim, "%s: ndim %d, want %d", what, got->ndim, ref->ndim);
  for (int d = 0; d < ref->ndim; d++)
    cr_assert_eq(got->shape[d], ref->shape[d], "%s: dim %d is %lld, want %lld", what, d,
                 (long long)got->shape[d], (long long)ref->shape[d]);
  cr_assert_eq(got->dtype, ref->dtype, "%s: dtype %s, want %s", what, eng_dtype_name(got->dtype),
               eng_dtype_name(ref->dtype));
  eng_tensor_t *host = NULL;
  T_OK(eng_tensor_to_device(got, ENG_CPU_DEVICE, &host));
  int64_t n = eng_tensor_numel(ref);
  if (!eng_dtype_is_float(ref->dtype)) { /* bit for bit (i64 does not fit a double) */
    size_t es = eng_dtype_size(ref->dtype);
    const char *gb = eng_tensor_data(host), *rb = eng_tensor_data(ref);
    for (int64_t i = 0; i < n; i++)
      if (memcmp(gb + (size_t)i * es, rb + (size_t)i * es, es))
        cr_assert_fail("%s: [%lld] = %.17g, want %.17g", what, (long long)i,
                       eng_load_f64(gb, ref->dtype, i), eng_load_f64(rb, ref->dtype, i));
    eng_tensor_release(host);
    return;
  }
  double *g = t_values(host), *r = t_values(ref), rtol, atol;
  elem_tol(ref->dtype, &rtol, &atol);
  int finite = 1;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(r[i]) || isinf(r[i]) || exact) {
      finite &= !isnan(r[i]) && !isinf(r[i]);
      cr_assert(g[i] == r[i] || (isnan(g[i]) && isnan(r[i])), "%s: [%lld] = %.17g, want %.17g",
                what, (long long)i, g[i], r[i]);
    } else {
      cr_assert(fabs(g[i] - r[i]) <= rtol * fabs(r[i]) + atol,
                "%s [%s]: [%lld] = %.17g, want %.17g", what, eng_dtype_name(ref->dtype),
                (long long)i, g[i], r[i]);
    }
  }
  if (finite && eng_dtype_is_float(ref->dtype)) {
    double err = t_rel_err(host, r, n);
    cr_assert(err <= t_tol(ref->dtype), "%s [%s]: rel err %g > %g", what,
              eng_dtype_name(ref->dtype), err, t_tol(ref->dtype));
  }
  free(g);
  free(r);
  eng_tensor_release(host);
}

/* Runs op `id` on the CPU inputs (the reference) and on their GPU twins into a poisoned output,
 * and compares; where the reference has NaNs (which a NaN poison would hide), again into zeros. */
static void check_op(eng_op_id_t id, const eng_op_attrs_t *attrs, pair_t *in, int n_in, int exact,
                     const char *what) {
  eng_tensor_t *cpu_in[3], *gpu_in[3];
  for (int k = 0; k < n_in; k++) cpu_in[k] = in[k].c, gpu_in[k] = in[k].g;
  eng_op_call_t c = {.id = id, .n_in = n_in, .in = cpu_in};
  if (attrs) c.attrs = *attrs;
  T_OK(eng_op_dispatch(&c));
  eng_tensor_t *ref = c.out[0];
  char msg[256];
  snprintf(msg, sizeof msg, "%s %s", eng_op_def(id)->name, what);
  for (int pass = 0; pass < 1 + has_nan(ref); pass++) {
    eng_op_call_t g = {.id = id, .n_in = n_in, .in = gpu_in};
    if (attrs) g.attrs = *attrs;
    eng_tensor_t *out = run_into(&g, ref, pass ? 0 : poison_of(ref->dtype));
    check_same(out, ref, exact, msg);
    eng_tensor_release(out);
  }
  eng_tensor_release(ref);
}

/* ---------------- unary ---------------- */

static int needs_positive(eng_unary_op_t op) {
  return op == ENG_UNARY_LOG || op == ENG_UNARY_SQRT || op == ENG_UNARY_RSQRT;
}

/* neg, abs and relu only move or flip values: they must be exact. */
static int unary_exact(eng_unary_op_t op) {
  return op == ENG_UNARY_NEG || op == ENG_UNARY_ABS || op == ENG_UNARY_RELU;
}

static void check_unary(eng_unary_op_t op, pair_t x, const char *what) {
  check_op((eng_op_id_t)(ENG_OP_NEG + op), NULL, &x, 1, unary_exact(op), what);
}

Test(cuda_elementwise, unary_contiguous_sizes) {
  SKIP_WITHOUT_GPU();
  for (int k = 0; k < NFLOATS; k++)
    for (int op = 0; op < ENG_UNARY_COUNT; op++)
      for (int s = 0; s < NSIZES; s++) {
        double lo = needs_positive(op) ? 0.05 : -4;
        pair_t x = pair_rand(&SIZES[s], 1, FLOATS[k], 100 + 13 * op + s, lo, 4);
        char what[64];
        snprintf(what, sizeof what, "[%lld] %s", (long long)SIZES[s], eng_dtype_name(FLOATS[k]));
        check_unary(op, x, what);
        pair_release(x);
      }
}

Test(cuda_elementwise, unary_views_and_scalars) {
  SKIP_WITHOUT_GPU();
  for (int k = 0; k < NFLOATS; k++)
    for (int op = 0; op < ENG_UNARY_COUNT; op++) {
      eng_dtype_t dt = FLOATS[k];
      double lo = needs_positive(op) ? 0.05 : -4;
      int64_t shape[2] = {37, 129}, row_shape[2] = {1, 129}, big[2] = {37, 129};
      pair_t s = pair_rand(NO_DIMS, 0, dt, 7 + op, lo, 4);
      check_unary(op, s, "0-d");
      pair_t t = pair_rand(shape, 2, dt, 11 + op, lo, 4);
      VIEW(t, pair_transpose, 0, 1);
      check_unary(op, t, "transposed");
      pair_t n = pair_rand(shape, 2, dt, 12 + op, lo, 4);
      VIEW(n, pair_narrow, 1, 3, 100);
      check_unary(op, n, "narrowed columns");
      pair_t e = pair_rand(row_shape, 2, dt, 13 + op, lo, 4);
      VIEW(e, pair_expand, big, 2);
      check_unary(op, e, "expanded row");
      pair_t m = pair_rand(&SIZES[3], 1, dt, 14 + op, lo, 4);
      VIEW(m, pair_narrow, 0, 3, 4000); /* contiguous, but off the 16-byte grid */
      check_unary(op, m, "misaligned");
      pair_release(s);
      pair_release(t);
      pair_release(n);
      pair_release(e);
      pair_release(m);
    }
}

Test(cuda_elementwise, unary_special_values) {
  SKIP_WITHOUT_GPU();
  double v[10] = {NAN, INFINITY, -INFINITY, 25.0, -25.0, -0.0, 0.0, 20.0, 19.5, -1e-3};
  int64_t shape[1] = {10};
  for (int k = 0; k < NFLOATS; k++) {
    pair_t x = pair_values(v, shape, 1, FLOATS[k]);
    for (int op = 0; op < ENG_UNARY_COUNT; op++) check_unary(op, x, "special values");
    pair_release(x);
  }
}

Test(cuda_elementwise, unary_integers) {
  SKIP_WITHOUT_GPU();
  static const eng_dtype_t ints[] = {ENG_I32, ENG_I64};
  static const eng_unary_op_t ops[] = {ENG_UNARY_NEG, ENG_UNARY_ABS, ENG_UNARY_RELU};
  int64_t shape[2] = {33, 129};
  for (int k = 0; k < 2; k++)
    for (int o = 0; o < 3; o++) {
      for (int s = 0; s < NSIZES; s++) {
        pair_t x = pair_rand(&SIZES[s], 1, ints[k], 3 + s, -1e6, 1e6);
        check_unary(ops[o], x, eng_dtype_name(ints[k]));
        pair_release(x);
      }
      pair_t t = pair_rand(shape, 2, ints[k], 9, -1e6, 1e6);
      VIEW(t, pair_transpose, 0, 1);
      check_unary(ops[o], t, "int transposed");
      pair_release(t);
      /* the most negative value wraps under neg and abs, like the CPU */
      double ext[5] = {ints[k] == ENG_I32 ? -2147483648.0 : -0x1p63, -1, 0, 1, 2147483647.0};
      int64_t n5[1] = {5};
      pair_t e = pair_values(ext, n5, 1, ints[k]);
      check_unary(ops[o], e, "int extremes");
      pair_release(e);
    }
  int64_t n = 4097;
  pair_t u = pair_rand(&n, 1, ENG_U8, 4, 0, 256);
  check_unary(ENG_UNARY_ABS, u, "u8");
  check_unary(ENG_UNARY_RELU, u, "u8");
  pair_release(u);
}

/* ---------------- binary ---------------- */

static int is_cmp(eng_binary_op_t op) { return op >= ENG_BINARY_EQ; }

/* Values suited to each op: integers for the comparisons (so that ties occur), positive bases
 * for pow, divisors away from 0. */
static pair_t binary_input(eng_binary_op_t op, int side, const int64_t *shape, int ndim,
                           eng_dtype_t dt, uint64_t seed) {
  if (is_cmp(op)) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    t_random(v, n, seed, -3, 3);
    for (int64_t i = 0; i < n; i++) v[i] = floor(v[i]);
    pair_t p = pair_values(v, shape, ndim, dt);
    free(v);
    return p;
  }
  if (op == ENG_BINARY_POW)
    return side == 0 ? pair_rand(shape, ndim, dt, seed, 0.5, 2)
                     : pair_rand(shape, ndim, dt, seed, -2, 2);
  if (op == ENG_BINARY_DIV && side == 1) return pair_rand(shape, ndim, dt, seed, 0.5, 2.5);
  return pair_rand(shape, ndim, dt, seed, -2, 2);
}

/* add/sub/mul/div/pow round; the others pick or compare, exactly. */
static int binary_exact(eng_binary_op_t op) { return op >= ENG_BINARY_MAXIMUM; }

static void check_binary(eng_binary_op_t op, pair_t a, pair_t b, const char *what) {
  pair_t in[2] = {a, b};
  check_op((eng_op_id_t)(ENG_OP_ADD + op), NULL, in, 2, binary_exact(op), what);
}

Test(cuda_elementwise, binary_contiguous_sizes) {
  SKIP_WITHOUT_GPU();
  for (int k = 0; k < NFLOATS; k++)
    for (int op = 0; op < ENG_BINARY_COUNT; op++)
      for (int s = 0; s < NSIZES; s++) {
        pair_t a = binary_input(op, 0, &SIZES[s], 1, FLOATS[k], 1000 + 31 * op + s);
        pair_t b = binary_input(op, 1, &SIZES[s], 1, FLOATS[k], 2000 + 31 * op + s);
        char what[64];
        snprintf(what, sizeof what, "[%lld] %s", (long long)SIZES[s], eng_dtype_name(FLOATS[k]));
        check_binary(op, a, b, what);
        pair_release(a);
        pair_release(b);
      }
}

/* Shape pairs: [3,1,5] with [4,1] (3-D strided), 0-d with [7,9] (scalar), rows + bias with D a
 * multiple of the pack (row mode, packs) and not (row mode, single elements), a column [N,1],
 * an outer product [N,1] with [1,D], [4097] with [1], and a 3-D broadcast over many tiles. */
Test(cuda_elementwise, binary_broadcasting) {
  SKIP_WITHOUT_GPU();
  static const int64_t sa[][3] = {{3, 1, 5}, {0},      {300, 64}, {33, 1023},
                                  {300, 64}, {300, 1}, {4097},    {37, 1, 129}};
  static const int64_t sb[][3] = {{4, 1}, {7, 9}, {64}, {1023}, {300, 1}, {1, 64}, {1}, {41, 1}};
  static const int na[] = {3, 0, 2, 2, 2, 2, 1, 3}, nb[] = {2, 2, 1, 1, 2, 2, 1, 2};
  for (int k = 0; k < NFLOATS; k++)
    for (int op = 0; op < ENG_BINARY_COUNT; op++)
      for (int s = 0; s < 8; s++) {
        eng_dtype_t dt = FLOATS[k];
        pair_t a = binary_input(op, 0, sa[s], na[s], dt, 3000 + 31 * op + s);
        pair_t b = binary_input(op, 1, sb[s], nb[s], dt, 4000 + 31 * op + s);
        char what[64];
        snprintf(what, sizeof what, "broadcast #%d %s", s, eng_dtype_name(dt));
        check_binary(op, a, b, what);
        if (op != ENG_BINARY_POW) { /* the exponents would become (negative) bases */
          snprintf(what, sizeof what, "broadcast #%d swapped %s", s, eng_dtype_name(dt));
          check_binary(op, b, a, what);
        }
        pair_release(a);
        pair_release(b);
      }
}

Test(cuda_elementwise, binary_views) {
  SKIP_WITHOUT_GPU();
  for (int k = 0; k < NFLOATS; k++)
    for (int op = 0; op < ENG_BINARY_COUNT; op++) {
      eng_dtype_t dt = FLOATS[k];
      int64_t s1[2] = {65, 129}, s2[2] = {129, 65}, s3[2] = {65, 300}, s4[1] = {129};
      int64_t s5[2] = {1, 129};
      pair_t a = binary_input(op, 0, s1, 2, dt, 5 + op);
      pair_t bt = binary_input(op, 1, s2, 2, dt, 6 + op);
      VIEW(bt, pair_transpose, 0, 1); /* [65,129] with strides (1,65) */
      check_binary(op, a, bt, "a with transposed b");
      pair_t an = binary_input(op, 0, s3, 2, dt, 7 + op);
      VIEW(an, pair_narrow, 1, 5, 129); /* [65,129] with strides (300,1) */
      check_binary(op, an, bt, "narrowed a with transposed b");
      pair_t row = binary_input(op, 1, s5, 2, dt, 8 + op);
      VIEW(row, pair_expand, s1, 2); /* [65,129] with strides (0,1) */
      check_binary(op, an, row, "narrowed a with an expanded row");
      pair_t st = binary_input(op, 1, s3, 2, dt, 9 + op);
      VIEW(st, pair_slice, 1, 1, 259, 2); /* [65,129] with strides (300,2) */
      check_binary(op, a, st, "a with a step-2 slice");
      pair_t c = binary_input(op, 1, s4, 1, dt, 10 + op);
      check_binary(op, bt, c, "transposed with a row");
      pair_release(a);
      pair_release(bt);
      pair_release(an);
      pair_release(row);
      pair_release(st);
      pair_release(c);
    }
}

/* Contiguous operands off the 16-byte grid: all at the same element offset (packs after a
 * head), and at different offsets (no packs). The output is a preset view at an offset too. */
Test(cuda_elementwise, binary_misaligned) {
  SKIP_WITHOUT_GPU();
  static const int64_t offs[][3] = {{3, 3, 3}, {1, 1, 1}, {1, 2, 0}, {0, 0, 5}};
  for (int k = 0; k < NFLOATS; k++)
    for (int o = 0; o < 4; o++) {
      eng_dtype_t dt = FLOATS[k];
      int64_t n = 4101, len = 4090;
      pair_t a = pair_rand(&n, 1, dt, 50 + o, -2, 2), b = pair_rand(&n, 1, dt, 60 + o, -2, 2);
      VIEW(a, pair_narrow, 0, offs[o][0], len);
      VIEW(b, pair_narrow, 0, offs[o][1], len);
      eng_tensor_t *ref = NULL, *base = poisoned(&n, 1, dt, GPU0), *out = NULL;
      T_OK(eng_op_binary(ENG_BINARY_MUL, a.c, b.c, &ref));
      T_OK(eng_tensor_narrow(base, 0, offs[o][2], len, &out));
      eng_tensor_t *in[2] = {a.g, b.g};
      eng_op_call_t g = {.id = ENG_OP_MUL, .n_in = 2, .in = in, .out = {out}};
      T_OK(eng_op_dispatch(&g));
      char what[64];
      snprintf(what, sizeof what, "mul at offsets %lld %lld -> %lld", (long long)offs[o][0],
               (long long)offs[o][1], (long long)offs[o][2]);
      check_same(out, ref, 0, what);
      /* the elements around the output view stay poisoned */
      double *v = NULL;
      eng_tensor_t *host = NULL;
      T_OK(eng_tensor_to_device(base, ENG_CPU_DEVICE, &host));
      v = t_values(host);
      for (int64_t i = 0; i < n; i++)
        if (i < offs[o][2] || i >= offs[o][2] + len)
          cr_assert(isnan(v[i]), "%s: element %lld outside the output was written", what,
                    (long long)i);
      free(v);
      eng_tensor_release(host);
      eng_tensor_release(out);
      eng_tensor_release(base);
      eng_tensor_release(ref);
      pair_release(a);
      pair_release(b);
    }
}

/* An op writing over its own input, element for element (in place). */
Test(cuda_elementwise, binary_in_place) {
  SKIP_WITHOUT_GPU();
  int64_t n = 100003, bias = 1;
  pair_t a = pair_rand(&n, 1, ENG_BF16, 70, -2, 2), b = pair_rand(&bias, 1, ENG_BF16, 71, -2, 2);
  eng_tensor_t *ref = NULL;
  T_OK(eng_op_binary(ENG_BINARY_ADD, a.c, b.c, &ref));
  eng_tensor_t *in[2] = {a.g, b.g};
  eng_op_call_t g = {.id = ENG_OP_ADD, .n_in = 2, .in = in, .out = {a.g}};
  T_OK(eng_op_dispatch(&g));
  check_same(a.g, ref, 0, "add in place");
  eng_tensor_release(ref);
  pair_release(a);
  pair_release(b);
}

/* Outputs the op allocates itself, through the typed API (promotion included). */
Test(cuda_elementwise, binary_fresh_outputs_and_promotion) {
  SKIP_WITHOUT_GPU();
  int64_t s1[2] = {17, 33}, s2[1] = {33};
  pair_t a = pair_rand(s1, 2, ENG_BF16, 80, -2, 2), b = pair_rand(s2, 1, ENG_F32, 81, -2, 2);
  pair_t i = pair_rand(s1, 2, ENG_I32, 82, -50, 50), j = pair_rand(s2, 1, ENG_I64, 83, 1, 9);
  for (int op = 0; op < ENG_BINARY_COUNT; op++) {
    eng_tensor_t *r = NULL, *g = NULL;
    T_OK(eng_op_binary(op, a.c, b.c, &r));
    T_OK(eng_op_binary(op, a.g, b.g, &g));
    check_same(g, r, binary_exact(op), "bf16 with f32");
    eng_tensor_release(r);
    eng_tensor_release(g);
    T_OK(eng_op_binary(op, i.c, j.c, &r));
    T_OK(eng_op_binary(op, i.g, j.g, &g));
    check_same(g, r, op != ENG_BINARY_DIV, "i32 with i64");
    eng_tensor_release(r);
    eng_tensor_release(g);
  }
  pair_release(a);
  pair_release(b);
  pair_release(i);
  pair_release(j);
}

Test(cuda_elementwise, binary_special_values) {
  SKIP_WITHOUT_GPU();
  double x[8] = {NAN, 1, NAN, INFINITY, -INFINITY, 0.0, -0.0, 2};
  double y[8] = {1, NAN, NAN, INFINITY, 3, -0.0, 0.0, -INFINITY};
  int64_t shape[1] = {8};
  for (int k = 0; k < NFLOATS; k++) {
    pair_t a = pair_values(x, shape, 1, FLOATS[k]), b = pair_values(y, shape, 1, FLOATS[k]);
    for (int op = 0; op < ENG_BINARY_COUNT; op++) check_binary(op, a, b, "special values");
    pair_release(a);
    pair_release(b);
  }
}

/* Integer arithmetic is exact and wraps like the CPU's; pow by squaring. */
Test(cuda_elementwise, binary_integers) {
  SKIP_WITHOUT_GPU();
  static const eng_dtype_t ints[] = {ENG_I32, ENG_I64, ENG_U8};
  static const double lo[] = {-2147483648.0, -0x1p62, 0}, hi[] = {2147483647.0, 0x1p62, 256};
  int64_t s1[2] = {65, 129}, s2[1] = {129}, s3[2] = {129, 65}, s4[2] = {65, 1};
  for (int k = 0; k < 3; k++)
    for (int op = 0; op < ENG_BINARY_COUNT; op++) {
      if (op == ENG_BINARY_DIV) continue;
      eng_dtype_t dt = ints[k];
      int small = op == ENG_BINARY_POW || is_cmp(op); /* small values: exponents, and ties */
      double l = small ? (dt == ENG_U8 ? 0 : -9) : lo[k], h = small ? 10 : hi[k];
      double el = op == ENG_BINARY_POW ? 0 : l, eh = op == ENG_BINARY_POW ? 40 : h;
      for (int s = 0; s < NSIZES; s++) {
        pair_t a = pair_rand(&SIZES[s], 1, dt, 90 + s + 7 * op, l, h);
        pair_t b = pair_rand(&SIZES[s], 1, dt, 190 + s + 7 * op, el, eh);
        check_binary(op, a, b, eng_dtype_name(dt));
        pair_release(a);
        pair_release(b);
      }
      pair_t a = pair_rand(s1, 2, dt, 300 + op, l, h), row = pair_rand(s2, 1, dt, 301 + op, el, eh);
      check_binary(op, a, row, "int rows");
      pair_t col = pair_rand(s4, 2, dt, 302 + op, el, eh);
      check_binary(op, a, col, "int column");
      pair_t t = pair_rand(s3, 2, dt, 303 + op, el, eh);
      VIEW(t, pair_transpose, 0, 1);
      check_binary(op, a, t, "int transposed");
      pair_t sc = pair_rand(NO_DIMS, 0, dt, 304 + op, el, eh);
      check_binary(op, a, sc, "int 0-d");
      pair_release(a);
      pair_release(row);
      pair_release(col);
      pair_release(t);
      pair_release(sc);
    }
}

Test(cuda_elementwise, binary_integer_pow_negative_exponent) {
  SKIP_WITHOUT_GPU();
  double base[3] = {2, 3, 4}, ex[3] = {1, -1, 2};
  int64_t shape[1] = {3};
  for (int k = 0; k < 2; k++) {
    eng_dtype_t dt = k ? ENG_I64 : ENG_I32;
    pair_t a = pair_values(base, shape, 1, dt), b = pair_values(ex, shape, 1, dt);
    eng_tensor_t *y = NULL;
    T_FAILS(eng_op_binary(ENG_BINARY_POW, a.g, b.g, &y), ENG_ERR_ARG, "negative exponent");
    cr_assert_null(y);
    pair_release(a);
    pair_release(b);
  }
}

/* Past 2^31 elements: the strided kernel's 64-bit path ([K,1] + [M] as u8, 2 GiB). */
Test(cuda_elementwise, binary_beyond_int32, .timeout = 240) {
  SKIP_WITHOUT_GPU();
  int64_t ka[2] = {46341, 1}, kb[1] = {46341}; /* 46341^2 = 2147488281 > 2^31 - 1 */
  pair_t a = pair_rand(ka, 2, ENG_U8, 400, 0, 256), b = pair_rand(kb, 1, ENG_U8, 401, 0, 256);
  eng_tensor_t *ref = NULL, *got = NULL, *host = NULL;
  T_OK(eng_op_binary(ENG_BINARY_ADD, a.c, b.c, &ref));
  T_OK(eng_op_binary(ENG_BINARY_ADD, a.g, b.g, &got));
  T_OK(eng_tensor_to_device(got, ENG_CPU_DEVICE, &host));
  int64_t n = eng_tensor_numel(ref);
  cr_assert_eq(eng_tensor_numel(host), n);
  const uint8_t *r = eng_tensor_data(ref), *g = eng_tensor_data(host);
  for (int64_t i = 0; i < n; i++)
    if (r[i] != g[i])
      cr_assert_fail("u8 add [46341,1] + [46341]: element %lld is %d, want %d", (long long)i, g[i],
                     r[i]);
  eng_tensor_release(ref);
  eng_tensor_release(got);
  eng_tensor_release(host);
  pair_release(a);
  pair_release(b);
}

/* ---------------- clamp ---------------- */

static void check_clamp(int has_lo, double lo, int has_hi, double hi, pair_t x, const char *what) {
  eng_op_attrs_t at = {0};
  at.flags = (has_lo ? ENG_ATTR_HAS_LO : 0) | (has_hi ? ENG_ATTR_HAS_HI : 0);
  at.f[0] = lo;
  at.f[1] = hi;
  char msg[160];
  snprintf(msg, sizeof msg, "%s (lo %s%g, hi %s%g)", what, has_lo ? "" : "open ", lo,
           has_hi ? "" : "open ", hi);
  check_op(ENG_OP_CLAMP, &at, &x, 1, 1, msg);
}

Test(cuda_elementwise, clamp_floats) {
  SKIP_WITHOUT_GPU();
  int64_t shape[2] = {37, 129};
  double sv[6] = {NAN, INFINITY, -INFINITY, -0.0, 0.3, -0.7};
  int64_t n6[1] = {6};
  for (int k = 0; k < NFLOATS; k++) {
    eng_dtype_t dt = FLOATS[k];
    for (int s = 0; s < NSIZES; s++) {
      pair_t x = pair_rand(&SIZES[s], 1, dt, 500 + s, -3, 3);
      check_clamp(1, -1.1, 1, 0.7, x, eng_dtype_name(dt));
      check_clamp(1, -0.3, 0, 0, x, eng_dtype_name(dt));
      check_clamp(0, 0, 1, 0.3, x, eng_dtype_name(dt));
      check_clamp(1, 1, 1, -1, x, "lo above hi");
      pair_release(x);
    }
    pair_t t = pair_rand(shape, 2, dt, 510, -3, 3);
    VIEW(t, pair_transpose, 0, 1);
    check_clamp(1, -1, 1, 1, t, "transposed");
    pair_release(t);
    pair_t sp = pair_values(sv, n6, 1, dt);
    check_clamp(1, -0.5, 1, 0.5, sp, "special values");
    pair_release(sp);
  }
}

/* Integer clamps use the integers inside [lo, hi], saturated to the dtype's range. */
Test(cuda_elementwise, clamp_integers) {
  SKIP_WITHOUT_GPU();
  static const eng_dtype_t ints[] = {ENG_I32, ENG_I64, ENG_U8};
  int64_t shape[2] = {33, 65};
  for (int k = 0; k < 3; k++) {
    eng_dtype_t dt = ints[k];
    double lo = dt == ENG_U8 ? 0 : -1000, hi = dt == ENG_U8 ? 256 : 1000;
    for (int s = 0; s < NSIZES; s++) {
      pair_t x = pair_rand(&SIZES[s], 1, dt, 600 + s, lo, hi);
      check_clamp(1, -2.5, 1, 200.5, x, eng_dtype_name(dt));
      check_clamp(1, 100.2, 0, 0, x, eng_dtype_name(dt));
      check_clamp(0, 0, 1, 99.9, x, eng_dtype_name(dt));
      check_clamp(1, -1e30, 1, 1e30, x, "bounds past the range");
      check_clamp(1, 300, 1, 400, x, "bounds above the values");
      pair_release(x);
    }
    pair_t t = pair_rand(shape, 2, dt, 610, lo, hi);
    VIEW(t, pair_transpose, 0, 1);
    check_clamp(1, 10, 1, 50, t, "transposed");
    pair_release(t);
  }
}

/* ---------------- where ---------------- */

static const eng_dtype_t ALL[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16, ENG_I32, ENG_I64, ENG_U8};

/* A condition of dtype dt: zeros (and -0), ones, NaN and other values in random places. */
static pair_t cond_input(const int64_t *shape, int ndim, eng_dtype_t dt, uint64_t seed) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  t_random(v, n, seed, 0, 6);
  static const double picks[6] = {0, -0.0, 1, NAN, -2.5, 7};
  for (int64_t i = 0; i < n; i++) v[i] = picks[(int)v[i]];
  pair_t p = pair_values(v, shape, ndim, dt);
  free(v);
  return p;
}

static void check_where(pair_t c, pair_t a, pair_t b, const char *what) {
  pair_t in[3] = {c, a, b};
  check_op(ENG_OP_WHERE, NULL, in, 3, 1, what);
}

Test(cuda_elementwise, where_dtypes_and_sizes) {
  SKIP_WITHOUT_GPU();
  for (int ci = 0; ci < 7; ci++)
    for (int vi = 0; vi < 7; vi++)
      for (int s = 0; s < NSIZES; s++) {
        eng_dtype_t cdt = ALL[ci], vdt = ALL[vi];
        double lo = vdt == ENG_U8 ? 0 : -100, hi = vdt == ENG_U8 ? 256 : 100;
        pair_t c = cond_input(&SIZES[s], 1, cdt, 700 + s + 7 * ci);
        pair_t a = pair_rand(&SIZES[s], 1, vdt, 800 + s, lo, hi);
        pair_t b = pair_rand(&SIZES[s], 1, vdt, 900 + s, lo, hi);
        char what[64];
        snprintf(what, sizeof what, "cond %s, values %s, [%lld]", eng_dtype_name(cdt),
                 eng_dtype_name(vdt), (long long)SIZES[s]);
        check_where(c, a, b, what);
        pair_release(c);
        pair_release(a);
        pair_release(b);
      }
}

/* cond [3,1,5], a [4,1], b 0-d; cond [N,D] with a row and a column; strided views. */
Test(cuda_elementwise, where_broadcasting_and_views) {
  SKIP_WITHOUT_GPU();
  static const eng_dtype_t vdts[] = {ENG_F32, ENG_BF16, ENG_I64, ENG_U8};
  int64_t c3[3] = {3, 1, 5}, a2[2] = {4, 1}, nd[2] = {300, 64}, row[1] = {64}, col[2] = {300, 1};
  int64_t tr[2] = {64, 300};
  for (int ci = 0; ci < 7; ci++)
    for (int vi = 0; vi < 4; vi++) {
      eng_dtype_t cdt = ALL[ci], vdt = vdts[vi];
      double lo = vdt == ENG_U8 ? 0 : -100, hi = vdt == ENG_U8 ? 256 : 100;
      pair_t c = cond_input(c3, 3, cdt, 1000 + ci);
      pair_t a = pair_rand(a2, 2, vdt, 1001, lo, hi), b = pair_rand(NO_DIMS, 0, vdt, 1002, lo, hi);
      check_where(c, a, b, "[3,1,5] [4,1] 0-d");
      check_where(c, b, a, "[3,1,5] 0-d [4,1]");
      pair_t cn = cond_input(nd, 2, cdt, 1003 + ci);
      pair_t r = pair_rand(row, 1, vdt, 1004, lo, hi), k = pair_rand(col, 2, vdt, 1005, lo, hi);
      check_where(cn, r, k, "[N,D] row column");
      pair_t ct = cond_input(tr, 2, cdt, 1006 + ci);
      VIEW(ct, pair_transpose, 0, 1);
      pair_t full = pair_rand(nd, 2, vdt, 1007, lo, hi);
      check_where(ct, full, r, "transposed cond");
      pair_t rc = cond_input(row, 1, cdt, 1008 + ci);
      check_where(rc, k, full, "row cond");
      pair_release(c);
      pair_release(a);
      pair_release(b);
      pair_release(cn);
      pair_release(r);
      pair_release(k);
      pair_release(ct);
      pair_release(full);
      pair_release(rc);
    }
}

/* ---------------- empty tensors ---------------- */

Test(cuda_elementwise, empty_tensors) {
  SKIP_WITHOUT_GPU();
  int64_t shape[2] = {0, 5}, row[1] = {5};
  pair_t a = pair_rand(shape, 2, ENG_F32, 1, -1, 1), b = pair_rand(row, 1, ENG_F32, 2, -1, 1);
  eng_tensor_t *y = NULL;
  T_OK(eng_op_unary(ENG_UNARY_EXP, a.g, &y));
  cr_assert_eq(eng_tensor_numel(y), 0);
  eng_tensor_release(y);
  T_OK(eng_op_binary(ENG_BINARY_ADD, a.g, b.g, &y));
  cr_assert(y->ndim == 2 && y->shape[0] == 0 && y->shape[1] == 5);
  eng_tensor_release(y);
  T_OK(eng_op_clamp(a.g, 1, 0, 0, 0, &y));
  eng_tensor_release(y);
  T_OK(eng_op_where(a.g, a.g, b.g, &y));
  cr_assert_eq(eng_tensor_numel(y), 0);
  eng_tensor_release(y);
  pair_release(a);
  pair_release(b);
}
