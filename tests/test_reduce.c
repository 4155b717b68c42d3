/* Reductions (sum mean max min var std over dim sets, keepdim) and argmax against naive double
 * references computed here from the inputs' stored values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"
#include "support.h"

static const eng_dtype_t FLOATS[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16};
#define NFLOATS 4

/* The output index of input flat index i when the dims in `mask` are dropped. */
static int64_t out_index(const int64_t *shape, int nd, unsigned mask, int64_t i) {
  int64_t o = 0, mul = 1;
  for (int d = nd - 1; d >= 0; d--) {
    int64_t c = i % shape[d];
    i /= shape[d];
    if (mask & (1u << d)) continue;
    o += c * mul;
    mul *= shape[d];
  }
  return o;
}

/* Naive reduction of values v of `shape` over the dims in mask; returns n_out values. */
static double *ref_reduce(eng_reduce_op_t op, const double *v, const int64_t *shape, int nd,
                          unsigned mask, int correction, int64_t *n_out) {
  int64_t n = t_numel(shape, nd), no = 1;
  for (int d = 0; d < nd; d++)
    if (!(mask & (1u << d))) no *= shape[d];
  double *sum = calloc((size_t)no + 1, sizeof(double)),
         *cnt = calloc((size_t)no + 1, sizeof(double));
  double *mx = malloc(sizeof(double) * ((size_t)no + 1)),
         *mn = malloc(sizeof(double) * ((size_t)no + 1));
  double *sq = calloc((size_t)no + 1, sizeof(double)),
         *out = malloc(sizeof(double) * ((size_t)no + 1));
  for (int64_t o = 0; o < no; o++) mx[o] = -INFINITY, mn[o] = INFINITY;
  for (int64_t i = 0; i < n; i++) {
    int64_t o = out_index(shape, nd, mask, i);
    sum[o] += v[i];
    cnt[o] += 1;
    if (isnan(v[i]) || v[i] > mx[o]) mx[o] = isnan(mx[o]) ? mx[o] : v[i];
    if (isnan(v[i]) || v[i] < mn[o]) mn[o] = isnan(mn[o]) ? mn[o] : v[i];
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t o = out_index(shape, nd, mask, i);
    double d = v[i] - sum[o] / cnt[o];
    sq[o] += d * d;
  }
  for (int64_t o = 0; o < no; o++) {
    double var = sq[o] / (cnt[o] - correction);
    switch (op) {
    case ENG_REDUCE_SUM: out[o] = sum[o]; break;
    case ENG_REDUCE_MEAN: out[o] = sum[o] / cnt[o]; break;
    case ENG_REDUCE_MAX: out[o] = mx[o]; break;
    case ENG_REDUCE_MIN: out[o] = mn[o]; break;
    case ENG_REDUCE_VAR: out[o] = var; break;
    case ENG_REDUCE_STD: out[o] = sqrt(var); break;
    default: break;
    }
  }
  free(sum);
  free(cnt);
  free(mx);
  free(mn);
  free(sq);
  *n_out = no;
  return out;
}

/* Relative error over the positions where ref is a number; NaN in ref must be NaN in y. */
static void check_values(const eng_tensor_t *y, const double *ref, int64_t n, eng_dtype_t dt,
                         const char *what) {
  double *v = t_values(y), num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(ref[i])) {
      cr_assert(isnan(v[i]), "%s: [%lld] = %g, want NaN", what, (long long)i, v[i]);
      continue;
    }
    if (!eng_dtype_is_float(dt))
      cr_assert(v[i] == ref[i], "%s: [%lld] = %.17g, want %.17g", what, (long long)i, v[i], ref[i]);
    num += (v[i] - ref[i]) * (v[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  free(v);
  double err = den > 0 ? sqrt(num / den) : sqrt(num);
  cr_assert(err <= t_tol(dt), "%s [%s]: rel err %g > %g", what, eng_dtype_name(dt), err, t_tol(dt));
}

/* Runs the reduction of x and checks shape, dtype and values. dims as given to eng_op_reduce. */
static void check_reduce(eng_reduce_op_t op, eng_tensor_t *x, const int64_t *dims, int ndims,
                         int keepdim, int correction, const char *what) {
  eng_tensor_t *y = NULL;
  T_OK(eng_op_reduce(op, x, dims, ndims, keepdim, correction, &y));
  unsigned mask = 0;
  for (int k = 0; k < ndims; k++) mask |= 1u << (dims[k] < 0 ? dims[k] + x->ndim : dims[k]);
  if (ndims == 0) mask = (1u << x->ndim) - 1;
  int64_t shape[ENG_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < x->ndim; d++)
    if (!(mask & (1u << d)))
      shape[nd++] = x->shape[d];
    else if (keepdim)
      shape[nd++] = 1;
  cr_assert_eq(y->ndim, nd, "%s: ndim %d, want %d", what, y->ndim, nd);
  for (int d = 0; d < nd; d++) cr_assert_eq(y->shape[d], shape[d], "%s: dim %d", what, d);
  int is_float = eng_dtype_is_float(x->dtype);
  eng_dtype_t want = !is_float && op == ENG_REDUCE_SUM ? ENG_I64 : x->dtype;
  cr_assert_eq(y->dtype, want, "%s: dtype %s", what, eng_dtype_name(y->dtype));
  double *v = t_values(x);
  int64_t no;
  double *ref = ref_reduce(op, v, x->shape, x->ndim, mask, correction, &no);
  char msg[160];
  snprintf(msg, sizeof msg, "%s %s (keepdim %d)", eng_reduce_name(op), what, keepdim);
  check_values(y, ref, no, want, msg);
  free(v);
  free(ref);
  eng_tensor_release(y);
}

typedef struct {
  int ndim;
  int64_t shape[4];
  int ndims;
  int64_t dims[4];
} rcase_t;

static const rcase_t CASES[] = {
    {1, {7}, 0, {0}},
    {1, {1023}, 1, {0}},
    {1, {1}, 1, {-1}},
    {2, {33, 5}, 1, {0}},
    {2, {33, 5}, 1, {-1}},
    {2, {33, 5}, 0, {0}},
    {3, {3, 4, 5}, 2, {0, 2}},
    {3, {3, 4, 5}, 2, {-2, -1}},
    {3, {3, 4, 5}, 1, {1}},
    {3, {3, 1, 5}, 2, {0, 1}},
    {3, {3, 4, 5}, 3, {2, 0, 1}},
    {4, {2, 3, 4, 5}, 2, {0, 3}},
    {4, {2, 3, 4, 5}, 2, {1, 2}},
    {4, {2, 3, 4, 5}, 3, {0, 2, 3}},
    {4, {2, 3, 1, 5}, 2, {1, 3}},
};
#define NCASES (int)(sizeof CASES / sizeof CASES[0])

Test(reduce, names) {
  cr_assert_str_eq(eng_reduce_name(ENG_REDUCE_SUM), "sum");
  cr_assert_str_eq(eng_reduce_name(ENG_REDUCE_STD), "std");
}

Test(reduce, float_dim_sets) {
  for (int k = 0; k < NFLOATS; k++)
    for (int c = 0; c < NCASES; c++)
      for (int op = 0; op < ENG_REDUCE_COUNT; op++)
        for (int keep = 0; keep < 2; keep++) {
          const rcase_t *rc = &CASES[c];
          eng_tensor_t *x = t_rand_tensor(rc->shape, rc->ndim, FLOATS[k], 100 + c * 11 + op, -3, 3);
          char what[64];
          snprintf(what, sizeof what, "case %d", c);
          check_reduce(op, x, rc->dims, rc->ndims, keep, 1, what);
          if (op == ENG_REDUCE_VAR || op == ENG_REDUCE_STD)
            check_reduce(op, x, rc->dims, rc->ndims, keep, 0, what);
          eng_tensor_release(x);
        }
}

Test(reduce, views) {
  int64_t shape[3] = {6, 5, 7};
  for (int k = 0; k < NFLOATS; k++)
    for (int op = 0; op < ENG_REDUCE_COUNT; op++) {
      eng_tensor_t *x = t_rand_tensor(shape, 3, FLOATS[k], 7 + op, -2, 2), *t = NULL, *n = NULL,
                   *r = NULL, *e = NULL;
      T_OK(eng_tensor_transpose(x, 0, 2, &t)); /* [7,5,6] */
      int64_t d0[1] = {0}, d1[1] = {-1}, d02[2] = {0, 2}, d12[2] = {1, 2};
      check_reduce(op, t, d0, 1, 0, 1, "transposed dim 0");
      check_reduce(op, t, d1, 1, 1, 1, "transposed dim -1");
      check_reduce(op, t, d02, 2, 0, 1, "transposed dims 0,2");
      check_reduce(op, t, NULL, 0, 0, 1, "transposed all");
      T_OK(eng_tensor_narrow(x, 1, 1, 3, &n)); /* [6,3,7] */
      check_reduce(op, n, d12, 2, 0, 1, "narrowed");
      T_OK(eng_tensor_narrow(x, 0, 2, 1, &r));
      int64_t es[3] = {4, 5, 7};
      T_OK(eng_tensor_expand(r, es, 3, &e));
      check_reduce(op, e, d0, 1, 0, 1, "expanded");
      check_reduce(op, e, d02, 2, 1, 1, "expanded");
      eng_tensor_release(x);
      eng_tensor_release(t);
      eng_tensor_release(n);
      eng_tensor_release(r);
      eng_tensor_release(e);
    }
}

Test(reduce, scalar_input) {
  static const int64_t one[1] = {1};
  eng_tensor_t *s = t_rand_tensor(one, 0, ENG_F32, 3, -2, 2), *y = NULL;
  int64_t d[1] = {-1};
  check_reduce(ENG_REDUCE_SUM, s, NULL, 0, 0, 1, "0-d");
  T_OK(eng_op_reduce(ENG_REDUCE_MAX, s, d, 1, 1, 1, &y));
  cr_assert_eq(y->ndim, 0);
  double *a = t_values(s), *b = t_values(y);
  cr_assert_eq(a[0], b[0]);
  free(a);
  free(b);
  eng_tensor_release(y);
  eng_tensor_release(s);
}

Test(reduce, large_parallel_paths) {
  int64_t all[2] = {317, 331}, cols[2] = {301, 257}, rows[2] = {3, 40001};
  int64_t d0[1] = {0}, d1[1] = {1};
  for (int k = 0; k < 2; k++) {
    eng_dtype_t dt = k ? ENG_F32 : ENG_F64;
    eng_tensor_t *a = t_rand_tensor(all, 2, dt, 1, -2, 2),
                 *c = t_rand_tensor(cols, 2, dt, 2, -2, 2);
    eng_tensor_t *r = t_rand_tensor(rows, 2, dt, 3, -2, 2);
    for (int op = 0; op < ENG_REDUCE_COUNT; op++) {
      check_reduce(op, a, NULL, 0, 0, 1, "large all");
      check_reduce(op, c, d0, 1, 0, 1, "large columns");
      check_reduce(op, r, d1, 1, 0, 1, "few long rows");
    }
    eng_tensor_release(a);
    eng_tensor_release(c);
    eng_tensor_release(r);
  }
}

Test(reduce, integers) {
  static const eng_dtype_t ints[] = {ENG_I32, ENG_I64, ENG_U8};
  int64_t shape[3] = {5, 33, 3};
  int64_t d1[1] = {1}, d02[2] = {0, 2};
  for (int k = 0; k < 3; k++) {
    eng_tensor_t *x = t_rand_tensor(shape, 3, ints[k], 4 + k, ints[k] == ENG_U8 ? 0 : -1000, 1000),
                 *t = NULL;
    static const eng_reduce_op_t ops[] = {ENG_REDUCE_SUM, ENG_REDUCE_MAX, ENG_REDUCE_MIN};
    T_OK(eng_tensor_transpose(x, 0, 1, &t));
    for (int o = 0; o < 3; o++) {
      check_reduce(ops[o], x, NULL, 0, 0, 1, "int all");
      check_reduce(ops[o], x, d1, 1, 1, 1, "int dim 1");
      check_reduce(ops[o], x, d02, 2, 0, 1, "int dims 0,2");
      check_reduce(ops[o], t, d1, 1, 0, 1, "int transposed");
    }
    eng_tensor_release(x);
    eng_tensor_release(t);
  }
  /* i64 beyond 2^53 stays exact; u8 sums do not wrap at 256 */
  int64_t n = 3, vals[3] = {(1LL << 60) + 1, (1LL << 60) + 3, (1LL << 60) + 2};
  eng_tensor_t *l = NULL, *y = NULL;
  T_OK(eng_tensor_empty(&n, 1, ENG_I64, ENG_CPU_DEVICE, &l));
  memcpy(eng_tensor_data(l), vals, sizeof vals);
  T_OK(eng_op_reduce(ENG_REDUCE_MAX, l, NULL, 0, 0, 1, &y));
  cr_assert_eq(*(int64_t *)eng_tensor_data(y), (1LL << 60) + 3);
  eng_tensor_release(y);
  T_OK(eng_op_reduce(ENG_REDUCE_MIN, l, NULL, 0, 0, 1, &y));
  cr_assert_eq(*(int64_t *)eng_tensor_data(y), (1LL << 60) + 1);
  eng_tensor_release(y);
  T_OK(eng_op_reduce(ENG_REDUCE_SUM, l, NULL, 0, 0, 1, &y));
  cr_assert_eq(*(int64_t *)eng_tensor_data(y), (int64_t)((3ULL << 60) + 6));
  eng_tensor_release(y);
  eng_tensor_release(l);
  int64_t big[1] = {40000};
  eng_tensor_t *u = NULL;
  T_OK(eng_tensor_full(big, 1, 255, ENG_U8, ENG_CPU_DEVICE, &u));
  T_OK(eng_op_reduce(ENG_REDUCE_SUM, u, NULL, 0, 0, 1, &y));
  cr_assert_eq(y->dtype, ENG_I64);
  cr_assert_eq(*(int64_t *)eng_tensor_data(y), 255LL * 40000);
  eng_tensor_release(y);
  eng_tensor_release(u);
}

Test(reduce, nan_and_empty) {
  double v[6] = {1, NAN, 3, 4, 5, 6};
  int64_t s[2] = {2, 3}, d1[1] = {1}, d0[1] = {0};
  eng_tensor_t *x = t_tensor(v, s, 2, ENG_F32), *y = NULL;
  T_OK(eng_op_reduce(ENG_REDUCE_MAX, x, d1, 1, 0, 1, &y));
  double *r = t_values(y);
  cr_assert(isnan(r[0]) && r[1] == 6, "max propagates NaN: %g %g", r[0], r[1]);
  free(r);
  eng_tensor_release(y);
  T_OK(eng_op_reduce(ENG_REDUCE_MIN, x, d1, 1, 0, 1, &y));
  r = t_values(y);
  cr_assert(isnan(r[0]) && r[1] == 4);
  free(r);
  eng_tensor_release(y);
  eng_tensor_release(x);

  int64_t es[2] = {3, 0};
  eng_tensor_t *e = NULL;
  T_OK(eng_tensor_empty(es, 2, ENG_F32, ENG_CPU_DEVICE, &e));
  T_OK(eng_op_reduce(ENG_REDUCE_SUM, e, d1, 1, 0, 1, &y));
  r = t_values(y);
  cr_assert(y->ndim == 1 && y->shape[0] == 3 && r[0] == 0 && r[1] == 0 && r[2] == 0,
            "sum of nothing is 0");
  free(r);
  eng_tensor_release(y);
  T_OK(eng_op_reduce(ENG_REDUCE_MEAN, e, d1, 1, 0, 1, &y));
  r = t_values(y);
  cr_assert(isnan(r[0]), "mean of nothing is NaN");
  free(r);
  eng_tensor_release(y);
  T_OK(eng_op_reduce(ENG_REDUCE_MAX, e, d0, 1, 0, 1, &y)); /* [0] output: nothing reduced away */
  cr_assert(y->ndim == 1 && y->shape[0] == 0);
  eng_tensor_release(y);
  T_FAILS(eng_op_reduce(ENG_REDUCE_MAX, e, d1, 1, 0, 1, &y), ENG_ERR_SHAPE,
          "max: the reduced dims of x [3,0] hold no elements");
  T_FAILS(eng_op_reduce(ENG_REDUCE_MIN, e, NULL, 0, 0, 1, &y), ENG_ERR_SHAPE,
          "min: the reduced dims");
  eng_tensor_release(e);
}

Test(reduce, errors) {
  int64_t s[3] = {3, 4, 5};
  eng_tensor_t *x = t_rand_tensor(s, 3, ENG_F32, 1, 0, 1),
               *i = t_rand_tensor(s, 3, ENG_I32, 2, 0, 9), *y = NULL;
  int64_t dup[2] = {1, -2}, bad[1] = {3};
  T_FAILS(eng_op_reduce(ENG_REDUCE_SUM, x, dup, 2, 0, 1, &y), ENG_ERR_ARG,
          "sum: dim 1 is given more than once");
  T_FAILS(eng_op_reduce(ENG_REDUCE_MEAN, x, bad, 1, 0, 1, &y), ENG_ERR_INDEX, "mean");
  T_FAILS(eng_op_reduce(ENG_REDUCE_MEAN, i, NULL, 0, 0, 1, &y), ENG_ERR_DTYPE,
          "mean: expected a floating dtype, got i32");
  T_FAILS(eng_op_reduce(ENG_REDUCE_VAR, i, NULL, 0, 0, 1, &y), ENG_ERR_DTYPE,
          "var: expected a floating dtype");
  T_FAILS(eng_op_reduce(ENG_REDUCE_STD, i, NULL, 0, 0, 1, &y), ENG_ERR_DTYPE,
          "std: expected a floating dtype");
  T_FAILS(eng_op_reduce(ENG_REDUCE_SUM, NULL, NULL, 0, 0, 1, &y), ENG_ERR_ARG,
          "sum: input 1 is missing");
  T_FAILS(eng_op_reduce(ENG_REDUCE_COUNT, x, NULL, 0, 0, 1, &y), ENG_ERR_ARG, "unknown op");
  T_FAILS(eng_op_reduce(ENG_REDUCE_SUM, x, NULL, -1, 0, 1, &y), ENG_ERR_ARG, "bad dim list");
  /* the rule checks the attrs of a direct dispatch */
  eng_tensor_t *in[1] = {x};
  eng_op_call_t call = {.id = ENG_OP_SUM, .n_in = 1, .in = in};
  call.attrs.ni = 2;
  call.attrs.i[0] = 2;
  call.attrs.i[1] = 1;
  T_FAILS(eng_op_dispatch(&call), ENG_ERR_INDEX, "sum: dims must be ascending");
  /* an output preset by the caller must be what the rule makes: sum of i32 is i64 */
  int64_t os[2] = {3, 5};
  eng_tensor_t *o = t_rand_tensor(os, 2, ENG_I32, 3, 0, 9);
  eng_tensor_t *iin[1] = {i};
  eng_op_call_t c2 = {.id = ENG_OP_SUM, .n_in = 1, .in = iin, .n_out = 1, .out = {o}};
  c2.attrs.ni = 1;
  c2.attrs.i[0] = 1;
  T_FAILS(eng_op_dispatch(&c2), ENG_ERR_SHAPE,
          "sum: the output must be a contiguous i64 [3,5], got a i32 [3,5]");
  eng_tensor_release(o);
  cr_assert_null(y);
  eng_tensor_release(x);
  eng_tensor_release(i);
}

/* ---------------- argmax ---------------- */

/* First index of the max of each line along dim (dim < 0: the flattened tensor); NaN wins. */
static double *ref_argmax(const double *v, const int64_t *shape, int nd, int dim, int64_t *n_out) {
  int64_t n = t_numel(shape, nd);
  int64_t outer = 1, len = n, inner = 1;
  if (dim >= 0) {
    outer = t_numel(shape, dim);
    len = shape[dim];
    inner = t_numel(shape + dim + 1, nd - dim - 1);
  }
  double *out = malloc(sizeof(double) * (size_t)(outer * inner));
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t best = 0;
      for (int64_t r = 0; r < len; r++) {
        double a = v[(o * len + r) * inner + i], b = v[(o * len + best) * inner + i];
        if (isnan(b)) break;
        if (isnan(a) || a > b) best = r;
      }
      out[o * inner + i] = (double)best;
    }
  *n_out = outer * inner;
  return out;
}

static void check_argmax(eng_tensor_t *x, int64_t dim, int flatten, int keepdim, const char *what) {
  eng_tensor_t *y = NULL;
  T_OK(eng_op_argmax(x, dim, flatten, keepdim, &y));
  cr_assert_eq(y->dtype, ENG_I64);
  int d = flatten ? -1 : (int)(dim < 0 ? dim + x->ndim : dim);
  int nd = 0;
  for (int k = 0; k < x->ndim; k++) {
    if (flatten || k == d) {
      if (keepdim) cr_assert_eq(y->shape[nd++], 1, "%s: kept dim %d", what, k);
    } else {
      cr_assert_eq(y->shape[nd++], x->shape[k], "%s: dim %d", what, k);
    }
  }
  cr_assert_eq(y->ndim, nd, "%s: ndim", what);
  double *v = t_values(x);
  int64_t no;
  double *ref = ref_argmax(v, x->shape, x->ndim, d, &no);
  double *got = t_values(y);
  for (int64_t i = 0; i < no; i++)
    cr_assert(got[i] == ref[i], "%s [%s]: [%lld] = %g, want %g", what, eng_dtype_name(x->dtype),
              (long long)i, got[i], ref[i]);
  free(v);
  free(ref);
  free(got);
  eng_tensor_release(y);
}

/* Small integer values, so that ties happen. */
static eng_tensor_t *tie_tensor(const int64_t *shape, int nd, eng_dtype_t dt, uint64_t seed) {
  int64_t n = t_numel(shape, nd);
  double *v = malloc(sizeof(double) * (size_t)n);
  t_random(v, n, seed, 0, 4);
  for (int64_t i = 0; i < n; i++) v[i] = floor(v[i]) + (eng_dtype_is_float(dt) ? 0.5 : 0);
  eng_tensor_t *t = t_tensor(v, shape, nd, dt);
  free(v);
  return t;
}

Test(reduce, argmax_all_dtypes) {
  static const eng_dtype_t all[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16, ENG_I32, ENG_I64, ENG_U8};
  int64_t shape[3] = {4, 33, 5};
  for (int k = 0; k < 7; k++) {
    eng_tensor_t *x = tie_tensor(shape, 3, all[k], 10 + k), *t = NULL;
    for (int keep = 0; keep < 2; keep++) {
      check_argmax(x, 0, 0, keep, "dim 0");
      check_argmax(x, 1, 0, keep, "dim 1");
      check_argmax(x, -1, 0, keep, "dim -1");
      check_argmax(x, 0, 1, keep, "flatten");
    }
    T_OK(eng_tensor_transpose(x, 0, 2, &t));
    check_argmax(t, 1, 0, 0, "transposed");
    check_argmax(t, -1, 0, 1, "transposed");
    eng_tensor_release(t);
    eng_tensor_release(x);
    eng_tensor_t *r = t_rand_tensor(shape, 3, all[k], 20 + k, 0, 100);
    check_argmax(r, 2, 0, 0, "random");
    eng_tensor_release(r);
  }
  int64_t big[2] = {301, 257};
  eng_tensor_t *g = t_rand_tensor(big, 2, ENG_F32, 5, -1, 1);
  check_argmax(g, 1, 0, 0, "large rows");
  check_argmax(g, 0, 0, 0, "large columns");
  check_argmax(g, 0, 1, 0, "large flatten");
  eng_tensor_release(g);
  static const int64_t one[1] = {1};
  eng_tensor_t *s = t_rand_tensor(one, 0, ENG_F32, 6, -1, 1);
  check_argmax(s, 0, 0, 0, "0-d");
  eng_tensor_release(s);
}

Test(reduce, argmax_nan_and_errors) {
  double v[8] = {1, NAN, 3, NAN, 7, 7, 2, 7};
  int64_t s[2] = {2, 4};
  eng_tensor_t *x = t_tensor(v, s, 2, ENG_F32), *y = NULL;
  T_OK(eng_op_argmax(x, 1, 0, 0, &y));
  const int64_t *r = eng_tensor_data(y);
  cr_assert(r[0] == 1 && r[1] == 0, "first NaN wins, then the first of tied maxima: %lld %lld",
            (long long)r[0], (long long)r[1]);
  eng_tensor_release(y);
  y = NULL;
  check_argmax(x, 0, 0, 0, "nan columns");
  check_argmax(x, 0, 1, 0, "nan flatten");
  int64_t es[2] = {3, 0};
  eng_tensor_t *e = NULL;
  T_OK(eng_tensor_empty(es, 2, ENG_F32, ENG_CPU_DEVICE, &e));
  T_FAILS(eng_op_argmax(e, 1, 0, 0, &y), ENG_ERR_SHAPE,
          "argmax: no elements to take the argmax of (x has shape [3,0])");
  T_FAILS(eng_op_argmax(e, 0, 1, 0, &y), ENG_ERR_SHAPE, "argmax: no elements");
  T_FAILS(eng_op_argmax(x, 2, 0, 0, &y), ENG_ERR_INDEX, "argmax");
  T_FAILS(eng_op_argmax(NULL, 0, 0, 0, &y), ENG_ERR_ARG, "argmax: input 1 is missing");
  cr_assert_null(y);
  eng_tensor_release(e);
  eng_tensor_release(x);
}
