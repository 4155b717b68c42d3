/* eng_op_matmul against a naive torch.matmul written here: every shape kind (dot, matrix-vector,
 * matrix, batched, broadcast batch), transposed/sliced/expanded views, every float dtype, empty
 * sizes, and each error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"
#include "support.h"

static const eng_dtype_t FLOATS[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};

/* torch.matmul on row-major double arrays, from the definition: 1-D operands become [1,k] and
 * [k,1], batch dims broadcast right-aligned, out[b,i,j] = sum_p A[b,i,p] * B[b,p,j]. The
 * dropped 1-dims do not change the row-major order of the result. */
static double *ref_matmul(const double *a, const int64_t *sa, int na, const double *b,
                          const int64_t *sb, int nb) {
  int64_t A[ENG_MAX_DIMS], B[ENG_MAX_DIMS];
  int ma = na, mb = nb;
  if (na == 1) A[0] = 1, A[1] = sa[0], ma = 2;
  else memcpy(A, sa, sizeof(int64_t) * (size_t)na);
  if (nb == 1) B[0] = sb[0], B[1] = 1, mb = 2;
  else memcpy(B, sb, sizeof(int64_t) * (size_t)nb);
  int bat_a = ma - 2, bat_b = mb - 2, nbat = bat_a > bat_b ? bat_a : bat_b;
  int64_t batch[ENG_MAX_DIMS];
  for (int d = 0; d < nbat; d++) {
    int da = d - (nbat - bat_a), db = d - (nbat - bat_b);
    int64_t x = da >= 0 ? A[da] : 1, y = db >= 0 ? B[db] : 1;
    batch[d] = x > y ? x : y;
  }
  int64_t m = A[ma - 2], k = A[ma - 1], n = B[mb - 1], nb_total = t_numel(batch, nbat);
  double *out = calloc((size_t)(nb_total * m * n + 1), sizeof(double));
  for (int64_t t = 0; t < nb_total; t++) {
    int64_t idx[ENG_MAX_DIMS], r = t, ao = 0, bo = 0;
    for (int d = nbat - 1; d >= 0; d--) idx[d] = r % batch[d], r /= batch[d];
    for (int d = 0; d < bat_a; d++) ao = ao * A[d] + (A[d] == 1 ? 0 : idx[d + nbat - bat_a]);
    for (int d = 0; d < bat_b; d++) bo = bo * B[d] + (B[d] == 1 ? 0 : idx[d + nbat - bat_b]);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t p = 0; p < k; p++) s += a[ao * m * k + i * k + p] * b[bo * k * n + p * n + j];
        out[t * m * n + i * n + j] = s;
      }
  }
  return out;
}

/* Multiplies a and b (any layout) and checks the result's dtype, shape and values. */
static void check_product(eng_tensor_t *a, eng_tensor_t *b, const int64_t *want_shape, int want_nd,
                          eng_dtype_t want_dt) {
  eng_tensor_t *c = NULL;
  T_OK(eng_op_matmul(a, b, &c));
  char s[128], w[128];
  cr_assert_eq(c->dtype, want_dt, "dtype %s, want %s", eng_dtype_name(c->dtype), eng_dtype_name(want_dt));
  cr_assert(c->ndim == want_nd && memcmp(c->shape, want_shape, sizeof(int64_t) * (size_t)want_nd) == 0,
            "%s @ %s gave %s, want %s", ENG_SHAPE_STR(a, s), ENG_SHAPE_STR(b, w), ENG_SHAPE_STR(c, s),
            eng_shape_str(want_shape, want_nd, w, sizeof w));
  double *av = t_values(a), *bv = t_values(b);
  double *ref = ref_matmul(av, a->shape, a->ndim, bv, b->shape, b->ndim);
  double err = t_rel_err(c, ref, t_numel(want_shape, want_nd));
  cr_assert(err <= t_tol(want_dt), "%s: %s @ %s: rel err %g > %g", eng_dtype_name(want_dt),
            ENG_SHAPE_STR(a, s), ENG_SHAPE_STR(b, w), err, t_tol(want_dt));
  free(av);
  free(bv);
  free(ref);
  eng_tensor_release(c);
}

typedef struct {
  int na, nb, nc;
  int64_t a[4], b[4], c[4];
} shape_case_t;

static const shape_case_t SHAPES[] = {
    {1, 1, 0, {33}, {33}, {0}},                        /* dot: a 0-d result */
    {1, 1, 0, {1}, {1}, {0}},
    {2, 2, 2, {1, 1}, {1, 1}, {1, 1}},
    {2, 2, 2, {7, 33}, {33, 5}, {7, 5}},
    {2, 2, 2, {65, 130}, {130, 33}, {65, 33}},         /* big enough for BLAS blocking */
    {1, 2, 1, {7}, {7, 5}, {5}},                       /* vector @ matrix */
    {2, 1, 1, {4, 7}, {7}, {4}},                       /* matrix @ vector */
    {3, 3, 3, {3, 4, 7}, {3, 7, 5}, {3, 4, 5}},        /* batched */
    {4, 3, 4, {2, 1, 4, 7}, {3, 7, 5}, {2, 3, 4, 5}},  /* broadcast batch dims */
    {3, 2, 3, {2, 4, 7}, {7, 5}, {2, 4, 5}},           /* shared weight */
    {4, 2, 4, {2, 3, 4, 7}, {7, 5}, {2, 3, 4, 5}},
    {2, 3, 3, {4, 7}, {2, 7, 5}, {2, 4, 5}},           /* shared left operand */
    {1, 3, 2, {7}, {2, 7, 5}, {2, 5}},                 /* vector @ batch */
    {3, 1, 2, {2, 4, 7}, {7}, {2, 4}},                 /* batch @ vector */
    {3, 3, 3, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
};

Test(matmul, shapes_all_float_dtypes) {
  for (size_t d = 0; d < sizeof FLOATS / sizeof *FLOATS; d++) {
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++) {
      const shape_case_t *c = &SHAPES[i];
      eng_tensor_t *a = t_rand_tensor(c->a, c->na, FLOATS[d], 100 + i, -1, 1);
      eng_tensor_t *b = t_rand_tensor(c->b, c->nb, FLOATS[d], 200 + i, -1, 1);
      check_product(a, b, c->c, c->nc, FLOATS[d]);
      eng_tensor_release(a);
      eng_tensor_release(b);
    }
  }
}

Test(matmul, dot_closed_form) {
  /* sum_{i<n} i * (n - i) = (n^3 - n) / 6 */
  const int64_t n = 33;
  double x[33], y[33];
  for (int i = 0; i < n; i++) x[i] = i, y[i] = (double)(n - i);
  eng_tensor_t *a = t_tensor(x, &n, 1, ENG_F64), *b = t_tensor(y, &n, 1, ENG_F64), *c = NULL;
  T_OK(eng_op_matmul(a, b, &c));
  cr_assert_eq(c->ndim, 0);
  cr_assert_eq(*(double *)eng_tensor_data(c), (double)(n * n * n - n) / 6);
  eng_tensor_release(a);
  eng_tensor_release(b);
  eng_tensor_release(c);
}

/* Views BLAS reads in place (transposes) and views that must be packed (slices with a step,
 * expanded dims, permuted batches), in every float dtype. */
Test(matmul, non_contiguous_views) {
  for (size_t d = 0; d < sizeof FLOATS / sizeof *FLOATS; d++) {
    eng_dtype_t dt = FLOATS[d];
    int64_t s33x7[2] = {33, 7}, s5x33[2] = {5, 33}, s7x66[2] = {7, 66}, s40x5[2] = {40, 5};
    eng_tensor_t *x = t_rand_tensor(s33x7, 2, dt, 1, -1, 1), *y = t_rand_tensor(s5x33, 2, dt, 2, -1, 1);
    eng_tensor_t *xt, *yt;
    T_OK(eng_tensor_transpose(x, 0, 1, &xt)); /* [7,33], column stride 7 */
    T_OK(eng_tensor_transpose(y, 0, 1, &yt)); /* [33,5] */
    int64_t want[2] = {7, 5};
    check_product(xt, yt, want, 2, dt);

    eng_tensor_t *wide = t_rand_tensor(s7x66, 2, dt, 3, -1, 1), *tall = t_rand_tensor(s40x5, 2, dt, 4, -1, 1);
    eng_tensor_t *stepped, *rows;
    T_OK(eng_tensor_slice(wide, 1, 1, 66, 2, &stepped)); /* [7,33], column stride 2 */
    T_OK(eng_tensor_narrow(tall, 0, 3, 33, &rows));      /* [33,5] at an offset */
    check_product(stepped, rows, want, 2, dt);
    check_product(stepped, yt, want, 2, dt);
    check_product(xt, rows, want, 2, dt);

    /* 1-D operands with a stride */
    eng_tensor_t *row, *col;
    T_OK(eng_tensor_select(wide, 0, 2, &row));      /* [66] */
    T_OK(eng_tensor_slice(row, 0, 0, 66, 2, &col)); /* [33], stride 2 */
    int64_t want5[1] = {5};
    check_product(col, rows, want5, 1, dt);
    int64_t want0[1] = {0};
    check_product(col, col, want0, 0, dt);

    /* batched: a permuted batch (no single row stride) and a transposed batch */
    int64_t s4x2x7[3] = {4, 2, 7}, s2x5x7[3] = {2, 5, 7};
    eng_tensor_t *p = t_rand_tensor(s4x2x7, 3, dt, 5, -1, 1), *q = t_rand_tensor(s2x5x7, 3, dt, 6, -1, 1);
    eng_tensor_t *pp, *qt;
    T_OK(eng_tensor_transpose(p, 0, 1, &pp)); /* [2,4,7] */
    T_OK(eng_tensor_transpose(q, 1, 2, &qt)); /* [2,7,5] */
    int64_t want245[3] = {2, 4, 5}, s5x7[2] = {5, 7};
    check_product(pp, qt, want245, 3, dt);
    eng_tensor_t *w57 = t_rand_tensor(s5x7, 2, dt, 9, -1, 1), *wt;
    T_OK(eng_tensor_transpose(w57, 0, 1, &wt)); /* [7,5] */
    check_product(pp, wt, want245, 3, dt);      /* a shared transposed weight */

    /* expanded operands: a broadcast batch and a matrix with a zero column stride */
    int64_t s1x4x7[3] = {1, 4, 7}, e3x4x7[3] = {3, 4, 7}, s4x1[2] = {4, 1}, e4x7[2] = {4, 7};
    eng_tensor_t *one = t_rand_tensor(s1x4x7, 3, dt, 7, -1, 1), *bcast, *colv = t_rand_tensor(s4x1, 2, dt, 8, -1, 1), *rep;
    T_OK(eng_tensor_expand(one, e3x4x7, 3, &bcast));
    T_OK(eng_tensor_expand(colv, e4x7, 2, &rep));
    int64_t want345[3] = {3, 4, 5}, want45[2] = {4, 5};
    check_product(bcast, wt, want345, 3, dt);
    check_product(rep, wt, want45, 2, dt);

    eng_tensor_t *all[] = {x, y, xt, yt, wide, tall, stepped, rows, row, col, p, q, pp, qt, w57, wt, one, bcast, colv, rep};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) eng_tensor_release(all[i]);
  }
}

Test(matmul, mixed_dtypes_promote) {
  int64_t sa[2] = {3, 4}, sb[2] = {4, 2}, want[2] = {3, 2};
  eng_tensor_t *a32 = t_rand_tensor(sa, 2, ENG_F32, 11, -1, 1), *b64 = t_rand_tensor(sb, 2, ENG_F64, 12, -1, 1);
  check_product(a32, b64, want, 2, ENG_F64);
  eng_tensor_t *a16 = t_rand_tensor(sa, 2, ENG_F16, 13, -1, 1), *bb16 = t_rand_tensor(sb, 2, ENG_BF16, 14, -1, 1);
  check_product(a16, bb16, want, 2, ENG_F32);
  eng_tensor_t *ai = t_rand_tensor(sa, 2, ENG_I32, 15, -5, 5);
  check_product(ai, b64, want, 2, ENG_F64);
  eng_tensor_t *all[] = {a32, b64, a16, bb16, ai};
  for (size_t i = 0; i < 5; i++) eng_tensor_release(all[i]);
}

Test(matmul, empty_sizes) {
  struct { int64_t a[3], b[3], c[3]; int na, nb; } cases[] = {
      {{0, 3}, {3, 4}, {0, 4}, 2, 2},
      {{3, 0}, {0, 4}, {3, 4}, 2, 2}, /* empty sums: zeros */
      {{0, 2, 3}, {3, 4}, {0, 2, 4}, 3, 2},
      {{2, 3, 0}, {2, 0, 5}, {2, 3, 5}, 3, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    for (size_t d = 0; d < sizeof FLOATS / sizeof *FLOATS; d++) {
      eng_tensor_t *a = t_rand_tensor(cases[i].a, cases[i].na, FLOATS[d], 1, -1, 1);
      eng_tensor_t *b = t_rand_tensor(cases[i].b, cases[i].nb, FLOATS[d], 2, -1, 1), *c = NULL;
      T_OK(eng_op_matmul(a, b, &c));
      cr_assert(c->ndim == cases[i].na && memcmp(c->shape, cases[i].c, sizeof(int64_t) * (size_t)c->ndim) == 0);
      int64_t n = eng_tensor_numel(c);
      double *v = t_values(c);
      for (int64_t j = 0; j < n; j++) cr_assert_eq(v[j], 0.0);
      free(v);
      eng_tensor_release(a);
      eng_tensor_release(b);
      eng_tensor_release(c);
    }
  }
}

Test(matmul, errors) {
  int64_t s43[2] = {4, 3}, s52[2] = {5, 2}, s243[3] = {2, 4, 3}, s332[3] = {3, 3, 2}, s3[1] = {3};
  eng_tensor_t *a = t_rand_tensor(s43, 2, ENG_F32, 1, -1, 1), *b = t_rand_tensor(s52, 2, ENG_F32, 2, -1, 1);
  eng_tensor_t *c = NULL;
  T_FAILS(eng_op_matmul(a, b, &c), ENG_ERR_SHAPE, "matmul: inner dims differ: [4,3] @ [5,2]");
  cr_assert_null(c);

  eng_tensor_t *ba = t_rand_tensor(s243, 3, ENG_F32, 3, -1, 1), *bb = t_rand_tensor(s332, 3, ENG_F32, 4, -1, 1);
  T_FAILS(eng_op_matmul(ba, bb, &c), ENG_ERR_SHAPE, "matmul: batch dims do not broadcast: [2,4,3] @ [3,3,2]");

  double one = 1.5;
  int64_t noshape[1] = {0};
  eng_tensor_t *scalar = t_tensor(&one, noshape, 0, ENG_F32), *v = t_rand_tensor(s3, 1, ENG_F32, 5, -1, 1);
  T_FAILS(eng_op_matmul(scalar, v, &c), ENG_ERR_SHAPE, "matmul: both arguments need at least 1 dim: [] @ [3]");
  T_FAILS(eng_op_matmul(v, scalar, &c), ENG_ERR_SHAPE, "[3] @ []");

  eng_tensor_t *ia = t_rand_tensor(s43, 2, ENG_I32, 6, -5, 5), *ib = t_rand_tensor(s3, 1, ENG_I64, 7, -5, 5);
  T_FAILS(eng_op_matmul(ia, ib, &c), ENG_ERR_DTYPE, "matmul: needs floating dtypes, got i32 @ i64");
  T_FAILS(eng_op_matmul(a, NULL, &c), ENG_ERR_ARG, "matmul: missing argument");

  /* the registry path wants one dtype (eng_op_matmul promotes before dispatching) */
  eng_tensor_t *a64 = t_rand_tensor(s43, 2, ENG_F64, 8, -1, 1), *in[2] = {a64, v};
  eng_op_call_t call = {.id = ENG_OP_MATMUL, .n_in = 2, .in = in};
  T_FAILS(eng_op_dispatch(&call), ENG_ERR_DTYPE, "matmul: dtypes differ: f64 @ f32");

  /* a preset output must be contiguous */
  int64_t s44[2] = {4, 4};
  eng_tensor_t *sq4 = t_rand_tensor(s44, 2, ENG_F32, 11, -1, 1), *o4 = t_rand_tensor(s44, 2, ENG_F32, 12, -1, 1), *o4t;
  T_OK(eng_tensor_transpose(o4, 0, 1, &o4t));
  eng_tensor_t *in4[2] = {sq4, sq4};
  eng_op_call_t preset = {.id = ENG_OP_MATMUL, .n_in = 2, .in = in4, .n_out = 1, .out = {o4t}};
  T_FAILS(eng_op_dispatch(&preset), ENG_ERR_LAYOUT,
          "matmul: the output must be a contiguous f32 [4,4], got a non-contiguous f32 [4,4]");

  /* sizes past BLAS's int range (expanded, so nothing big is allocated) */
  int64_t s11[2] = {1, 1}, wide[2] = {1, (int64_t)1 << 31}, tall[2] = {(int64_t)1 << 31, 1};
  eng_tensor_t *u = t_rand_tensor(s11, 2, ENG_F32, 13, -1, 1), *uw, *ut;
  T_OK(eng_tensor_expand(u, wide, 2, &uw));
  T_OK(eng_tensor_expand(u, tall, 2, &ut));
  T_FAILS(eng_op_matmul(uw, ut, &c), ENG_ERR_UNSUPPORTED, "exceed BLAS's 32-bit limit");

  eng_tensor_t *all[] = {a, b, ba, bb, scalar, v, ia, ib, a64, sq4, o4, o4t, u, uw, ut};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) eng_tensor_release(all[i]);
}
