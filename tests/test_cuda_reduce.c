/* Reductions (sum mean max min var std) and argmax on CUDA against the CPU reference: fresh
 * random inputs, poisoned outputs, odd sizes (1, 7, 1023, 4097) along the reduced dims and the
 * kept ones, every dim pattern (last, first, middle, several, all), keepdim, views, integers,
 * NaN and empty reductions, ties, and shapes that make the kernels split the reduced dim over
 * several blocks (few long rows, few long columns, everything into one value), and columns
 * whose rows are 16-byte aligned. */
#include "cuda_numeric.h"

static const eng_dtype_t FLOATS[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};
static const eng_dtype_t INTS[] = {ENG_I32, ENG_I64, ENG_U8};
#define NFLOATS 4
#define NINTS 3
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define DIMS(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define ALL NULL, 0

/* Random values for reductions: mixed signs, but a positive mean, so that sums do not cancel to
 * near zero (the relative error of a cancelled sum says nothing about the kernel). */
#define LO (-1.0)
#define HI 3.0

/* op over dims of x (ndims = 0: all) on both devices; the CUDA result must match the CPU one. */
static void check_reduce(eng_reduce_op_t op, pair_t x, const int64_t *dims, int ndims, int keepdim,
                         int correction, const char *what) {
  eng_tensor_t *want = NULL;
  T_OK(eng_op_reduce(op, x.c, dims, ndims, keepdim, correction, &want));
  eng_tensor_t *in[1] = {x.g};
  eng_op_call_t call = {.id = (eng_op_id_t)(ENG_OP_SUM + op), .n_in = 1, .in = in};
  const int nd = x.g->ndim;
  unsigned mask = 0;
  for (int k = 0; k < ndims; k++) mask |= 1u << (dims[k] < 0 ? dims[k] + (nd ? nd : 1) : dims[k]);
  for (int d = 0; d < nd; d++)
    if (mask & (1u << d)) call.attrs.i[call.attrs.ni++] = d;
  call.attrs.flags = keepdim ? ENG_ATTR_KEEPDIM : 0;
  call.attrs.f[0] = correction;
  char msg[256], s[ENG_MAX_DIMS * 24];
  snprintf(msg, sizeof msg, "%s of %s %s %s (%d dims, keepdim %d, correction %d)",
           eng_reduce_name(op), eng_dtype_name(x.c->dtype), ENG_SHAPE_STR(x.c, s), what, ndims,
           keepdim, correction);
  expect_call(&call, want, msg);
  eng_tensor_release(want);
}

/* Every op that takes x's dtype (floats: all six, var/std with corrections 1 and 0; integers:
 * sum, max, min). */
static void check_ops(pair_t x, const int64_t *dims, int ndims, int keepdim, const char *what) {
  int is_float = eng_dtype_is_float(x.c->dtype);
  for (int op = 0; op < ENG_REDUCE_COUNT; op++) {
    if (!is_float && op != ENG_REDUCE_SUM && op != ENG_REDUCE_MAX && op != ENG_REDUCE_MIN) continue;
    check_reduce(op, x, dims, ndims, keepdim, 1, what);
    if (op == ENG_REDUCE_VAR || op == ENG_REDUCE_STD) check_reduce(op, x, dims, ndims, keepdim, 0, what);
  }
}

static void check_argmax(pair_t x, int64_t dim, int flatten, int keepdim, const char *what) {
  eng_tensor_t *want = NULL;
  T_OK(eng_op_argmax(x.c, dim, flatten, keepdim, &want));
  eng_tensor_t *in[1] = {x.g};
  eng_op_call_t call = {.id = ENG_OP_ARGMAX, .n_in = 1, .in = in};
  int d = 0;
  if (!flatten) T_OK(eng_dim_wrap("argmax", dim, x.g->ndim ? x.g->ndim : 1, &d));
  call.attrs.i[0] = d;
  call.attrs.ni = 1;
  call.attrs.flags = (keepdim ? ENG_ATTR_KEEPDIM : 0) | (flatten ? ENG_ATTR_FLATTEN : 0);
  char msg[256], s[ENG_MAX_DIMS * 24];
  snprintf(msg, sizeof msg, "argmax of %s %s %s (dim %lld, flatten %d, keepdim %d)",
           eng_dtype_name(x.c->dtype), ENG_SHAPE_STR(x.c, s), what, (long long)dim, flatten, keepdim);
  expect_call(&call, want, msg);
  eng_tensor_release(want);
}

/* ---------------- reductions ---------------- */

/* The hot case: rows along the last dim, odd counts of rows and odd row lengths. */
Test(cuda_reduce, rows_odd_sizes) {
  SKIP_WITHOUT_GPU();
  static const int64_t outers[] = {1, 7, 1023}, lens[] = {1, 7, 1023, 4097};
  for (int k = 0; k < NFLOATS; k++)
    for (int o = 0; o < 3; o++)
      for (int l = 0; l < 4; l++) {
        pair_t x = pair_rand(SHAPE(outers[o], lens[l]), FLOATS[k], 10 + o * 4 + l, LO, HI);
        check_ops(x, DIMS(-1), (o + l) % 2, "rows");
        pair_release(x);
      }
}

/* Reducing a leading or middle dim: columns walked down n, coalesced across the kept dims. */
Test(cuda_reduce, columns_odd_sizes) {
  SKIP_WITHOUT_GPU();
  static const int64_t lens[] = {1, 7, 1023, 4097}, inners[] = {7, 1023};
  for (int k = 0; k < NFLOATS; k++)
    for (int l = 0; l < 4; l++)
      for (int i = 0; i < 2; i++) {
        pair_t x = pair_rand(SHAPE(lens[l], inners[i]), FLOATS[k], 30 + l * 2 + i, LO, HI);
        check_ops(x, DIMS(0), i, "first dim");
        pair_release(x);
        pair_t y = pair_rand(SHAPE(7, lens[l], inners[i]), FLOATS[k], 40 + l * 2 + i, LO, HI);
        check_ops(y, DIMS(1), 1 - i, "middle dim");
        pair_release(y);
      }
}

/* Columns whose rows are 16-byte aligned (the kept size a multiple of 8 elements): a thread folds
 * 16 bytes of adjacent columns (fold_cols<V > 1>), unsplit and split; [32768, 512] is the E-series
 * bias gradient's shape (B T rows of d). */
Test(cuda_reduce, aligned_columns) {
  SKIP_WITHOUT_GPU();
  static const int64_t lens[] = {1, 7, 4097}, inners[] = {8, 24, 512};
  for (int k = 0; k < NFLOATS; k++)
    for (int l = 0; l < 3; l++)
      for (int i = 0; i < 3; i++) {
        pair_t x = pair_rand(SHAPE(lens[l], inners[i]), FLOATS[k], 110 + l * 3 + i, LO, HI);
        check_ops(x, DIMS(0), (l + i) % 2, "aligned columns");
        pair_release(x);
        pair_t y = pair_rand(SHAPE(3, lens[l], inners[i]), FLOATS[k], 120 + l * 3 + i, LO, HI);
        check_ops(y, DIMS(1), (l + i + 1) % 2, "aligned middle dim");
        pair_release(y);
      }
  for (int k = 0; k < NINTS; k++) {
    pair_t x = pair_rand(SHAPE(4097, 64), INTS[k], 125 + k, 0, 200);
    check_ops(x, DIMS(0), k % 2, "aligned int columns");
    pair_release(x);
  }
  pair_t big = pair_rand(SHAPE(32768, 512), ENG_BF16, 130, LO, HI);
  check_reduce(ENG_REDUCE_SUM, big, DIMS(0), 0, 1, "a bias gradient's columns");
  pair_release(big);
}

/* Sets of dims: adjacent (merged in place), apart (permuted behind the kept dims), all. */
Test(cuda_reduce, dim_sets) {
  SKIP_WITHOUT_GPU();
  for (int k = 0; k < NFLOATS; k++)
    for (int keep = 0; keep < 2; keep++) {
      pair_t x = pair_rand(SHAPE(7, 1023, 7), FLOATS[k], 50 + k, LO, HI);
      check_ops(x, DIMS(0, 2), keep, "dims apart");
      check_ops(x, DIMS(0, 1), keep, "leading dims");
      check_ops(x, DIMS(-2, -1), keep, "trailing dims");
      check_ops(x, ALL, keep, "all dims");
      pair_release(x);
      pair_t y = pair_rand(SHAPE(3, 7, 1, 33), FLOATS[k], 60 + k, LO, HI);
      check_ops(y, DIMS(0, 3), keep, "outer dims");
      check_ops(y, DIMS(1, 3), keep, "dims around a size-1 dim");
      check_ops(y, DIMS(2), keep, "a size-1 dim");
      pair_release(y);
      static const int64_t one[1] = {1};
      pair_t z = pair_rand(one, 0, FLOATS[k], 70 + k, LO, HI);
      check_ops(z, ALL, keep, "0-d");
      check_ops(z, DIMS(-1), keep, "0-d");
      pair_release(z);
    }
}

/* Strided inputs: the adapter lays them out as [outer, n, inner] with a device copy. */
Test(cuda_reduce, views) {
  SKIP_WITHOUT_GPU();
  for (int k = 0; k < NFLOATS; k++) {
    pair_t x = pair_rand(SHAPE(7, 33, 1023), FLOATS[k], 80 + k, LO, HI);
    pair_t t = pair_transpose(x, 0, 2);        /* [1023, 33, 7] */
    pair_t n = pair_narrow(x, 2, 3, 1000);     /* rows with an offset and a stride */
    pair_t s = pair_slice(x, 1, 1, 33, 2);     /* every other middle entry */
    pair_t r = pair_narrow(x, 0, 2, 1);
    pair_t e = pair_expand(r, SHAPE(5, 33, 1023)); /* stride 0 along dim 0 */
    check_ops(t, DIMS(-1), 0, "transposed");
    check_ops(t, DIMS(0), 1, "transposed");
    check_ops(t, DIMS(0, 2), 0, "transposed");
    check_ops(n, DIMS(-1), 0, "narrowed");
    check_ops(n, DIMS(0, 1), 1, "narrowed");
    check_ops(s, DIMS(1), 0, "sliced");
    check_ops(s, ALL, 0, "sliced");
    check_ops(e, DIMS(0), 0, "expanded");
    check_ops(e, DIMS(0, 2), 1, "expanded");
    pair_release(x);
    pair_release(t);
    pair_release(n);
    pair_release(s);
    pair_release(r);
    pair_release(e);
  }
}

/* Shapes whose outputs are too few to fill the GPU: the reduced dim is split in chunks folded by
 * a second pass (rows, columns, everything into one value, and var/std's two folds). */
Test(cuda_reduce, split_paths) {
  SKIP_WITHOUT_GPU();
  static const eng_dtype_t dts[] = {ENG_F64, ENG_F32, ENG_BF16};
  for (int k = 0; k < 3; k++) {
    pair_t rows = pair_rand(SHAPE(3, 40001), dts[k], 90 + k, LO, HI);
    check_ops(rows, DIMS(1), 0, "few long rows");
    pair_release(rows);
    pair_t one = pair_rand(SHAPE(1, 1048583), dts[k], 93 + k, LO, HI);
    check_ops(one, DIMS(1), 1, "one long row");
    pair_release(one);
    pair_t all = pair_rand(SHAPE(1000, 1001), dts[k], 96 + k, LO, HI);
    check_ops(all, ALL, 0, "all of a matrix");
    pair_release(all);
    pair_t cols = pair_rand(SHAPE(200001, 3), dts[k], 99 + k, LO, HI);
    check_ops(cols, DIMS(0), 0, "few long columns");
    pair_release(cols);
    pair_t mid = pair_rand(SHAPE(5, 70001, 2), dts[k], 102 + k, LO, HI);
    check_ops(mid, DIMS(1), 1, "long middle dim");
    pair_release(mid);
  }
}

/* Integer sums fold exactly in int64 (wrapping) into i64; max/min keep the dtype. */
Test(cuda_reduce, integers) {
  SKIP_WITHOUT_GPU();
  for (int k = 0; k < NINTS; k++) {
    eng_dtype_t dt = INTS[k];
    double lo = dt == ENG_U8 ? 0 : -1000, hi = dt == ENG_U8 ? 256 : 1000;
    pair_t x = pair_rand(SHAPE(7, 1023), dt, 110 + k, lo, hi);
    check_ops(x, DIMS(1), 0, "rows");
    check_ops(x, DIMS(0), 1, "columns");
    check_ops(x, ALL, 0, "all");
    pair_t t = pair_transpose(x, 0, 1);
    check_ops(t, DIMS(1), 0, "transposed");
    pair_release(t);
    pair_release(x);
    pair_t y = pair_rand(SHAPE(5, 4097, 3), dt, 113 + k, lo, hi);
    check_ops(y, DIMS(1), 0, "middle dim");
    check_ops(y, DIMS(0, 2), 0, "dims apart");
    pair_release(y);
    pair_t rows = pair_rand(SHAPE(3, 40001), dt, 116 + k, lo, hi);
    check_ops(rows, DIMS(1), 0, "split rows");
    pair_release(rows);
    pair_t cols = pair_rand(SHAPE(200001, 3), dt, 119 + k, lo, hi);
    check_ops(cols, DIMS(0), 0, "split columns");
    pair_release(cols);
  }
  /* i64 beyond 2^53 stays exact, and a sum past INT64_MAX wraps as on the CPU */
  static const int64_t big[5] = {(1LL << 60) + 1, (1LL << 60) + 3, INT64_MAX, (1LL << 60) + 2, 7};
  eng_tensor_t *b = NULL;
  T_OK(eng_tensor_empty(SHAPE(5), ENG_I64, ENG_CPU_DEVICE, &b));
  memcpy(eng_tensor_data(b), big, sizeof big);
  pair_t p = pair_of(b);
  check_ops(p, ALL, 0, "i64 beyond 2^53");
  pair_release(p);
}

Test(cuda_reduce, nan_and_empty) {
  SKIP_WITHOUT_GPU();
  /* NaN planted in some rows / columns propagates through max and min (and every sum) */
  for (int k = 0; k < NFLOATS; k++) {
    eng_tensor_t *c = t_rand_tensor(SHAPE(7, 1023), FLOATS[k], 130 + k, LO, HI);
    eng_store_f64(eng_tensor_data(c), FLOATS[k], 2 * 1023 + 500, NAN);
    eng_store_f64(eng_tensor_data(c), FLOATS[k], 5 * 1023 + 1022, NAN);
    pair_t x = pair_of(c);
    check_ops(x, DIMS(1), 0, "NaN rows");
    check_ops(x, DIMS(0), 0, "NaN columns");
    pair_release(x);
    eng_tensor_t *l = t_rand_tensor(SHAPE(3, 40001), FLOATS[k], 134 + k, LO, HI);
    eng_store_f64(eng_tensor_data(l), FLOATS[k], 40001 + 39999, NAN);
    pair_t y = pair_of(l);
    check_ops(y, DIMS(1), 0, "NaN in a split row");
    pair_release(y);
  }
  /* empty reductions: sum 0, mean/var/std NaN; an empty kept dim gives an empty output */
  for (int k = 0; k < NFLOATS; k++) {
    pair_t e = pair_rand(SHAPE(3, 0), FLOATS[k], 140, LO, HI);
    static const eng_reduce_op_t ops[] = {ENG_REDUCE_SUM, ENG_REDUCE_MEAN, ENG_REDUCE_VAR,
                                          ENG_REDUCE_STD};
    for (int o = 0; o < 4; o++) {
      check_reduce(ops[o], e, DIMS(1), 0, 1, "empty rows");
      check_reduce(ops[o], e, DIMS(1), 1, 0, "empty rows");
    }
    pair_t f = pair_transpose(e, 0, 1); /* [0, 3] */
    check_reduce(ENG_REDUCE_SUM, f, DIMS(0), 0, 1, "empty columns");
    check_reduce(ENG_REDUCE_MEAN, f, DIMS(0), 0, 1, "empty columns");
    check_ops(e, DIMS(0), 0, "nothing to reduce into");
    eng_tensor_t *y = NULL;
    T_FAILS(eng_op_reduce(ENG_REDUCE_MAX, e.g, DIMS(1), 0, 1, &y), ENG_ERR_SHAPE,
            "max: the reduced dims of x [3,0] hold no elements");
    pair_release(f);
    pair_release(e);
  }
  pair_t ei = pair_rand(SHAPE(0, 5), ENG_I32, 141, 0, 9);
  check_reduce(ENG_REDUCE_SUM, ei, DIMS(0), 0, 1, "empty int columns");
  pair_release(ei);
}

/* ---------------- argmax ---------------- */

Test(cuda_argmax, dims_and_sizes) {
  SKIP_WITHOUT_GPU();
  static const eng_dtype_t dts[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16, ENG_I32, ENG_I64, ENG_U8};
  static const int64_t lens[] = {1, 7, 1023, 4097};
  for (int k = 0; k < 7; k++) {
    double lo = dts[k] == ENG_U8 ? 0 : -1000, hi = dts[k] == ENG_U8 ? 256 : 1000;
    for (int l = 0; l < 4; l++) {
      pair_t x = pair_rand(SHAPE(7, lens[l], 5), dts[k], 150 + k * 4 + l, lo, hi);
      for (int64_t d = -1; d < 3; d++) check_argmax(x, d, 0, (int)(d & 1), "3-d");
      check_argmax(x, 0, 1, 0, "flattened");
      check_argmax(x, 0, 1, 1, "flattened");
      pair_t t = pair_transpose(x, 0, 1);
      check_argmax(t, -1, 0, 0, "transposed");
      check_argmax(t, 0, 1, 0, "transposed, flattened");
      pair_release(t);
      pair_release(x);
      pair_t r = pair_rand(SHAPE(1023, lens[l]), dts[k], 180 + k * 4 + l, lo, hi);
      check_argmax(r, 1, 0, 0, "rows");
      check_argmax(r, 0, 0, 0, "columns");
      pair_release(r);
      pair_t a = pair_rand(SHAPE(lens[l], 64), dts[k], 190 + k * 4 + l, lo, hi);
      check_argmax(a, 0, 0, 0, "aligned columns");
      pair_release(a);
    }
  }
}

/* Few values, many ties: the first index of the max must win, however the work is split. */
Test(cuda_argmax, ties_and_splits) {
  SKIP_WITHOUT_GPU();
  static const eng_dtype_t dts[] = {ENG_F32, ENG_BF16, ENG_I64, ENG_U8};
  for (int k = 0; k < 4; k++) {
    int64_t shapes[4][2] = {{7, 4097}, {3, 100003}, {1000, 1001}, {200001, 3}};
    for (int s = 0; s < 4; s++) {
      int64_t n = shapes[s][0] * shapes[s][1];
      double *v = malloc(sizeof(double) * (size_t)n);
      t_random(v, n, 200 + k * 4 + s, 0, 4);
      for (int64_t i = 0; i < n; i++) v[i] = floor(v[i]);
      pair_t x = pair_values(v, shapes[s], 2, dts[k]);
      free(v);
      check_argmax(x, 1, 0, 0, "ties along rows");
      check_argmax(x, 0, 0, 1, "ties along columns");
      check_argmax(x, 0, 1, 0, "ties, flattened");
      pair_release(x);
    }
  }
}

/* A NaN counts as the max; the first NaN wins. */
Test(cuda_argmax, nan) {
  SKIP_WITHOUT_GPU();
  for (int k = 0; k < NFLOATS; k++) {
    eng_tensor_t *c = t_rand_tensor(SHAPE(5, 40001), FLOATS[k], 220 + k, -3, 3);
    eng_store_f64(eng_tensor_data(c), FLOATS[k], 1 * 40001 + 30000, NAN);
    eng_store_f64(eng_tensor_data(c), FLOATS[k], 1 * 40001 + 20000, NAN);
    eng_store_f64(eng_tensor_data(c), FLOATS[k], 3 * 40001 + 0, NAN);
    eng_store_f64(eng_tensor_data(c), FLOATS[k], 4 * 40001 + 40000, NAN);
    pair_t x = pair_of(c);
    check_argmax(x, 1, 0, 0, "NaN rows");
    check_argmax(x, 0, 0, 0, "NaN columns");
    check_argmax(x, 0, 1, 0, "NaN, flattened");
    pair_release(x);
  }
}
