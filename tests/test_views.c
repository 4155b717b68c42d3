/* Views: each one checked element by element against index arithmetic on the base's values,
 * shares the base's storage, and reports its errors. */
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* A [d0,d1,...] f64 tensor of random values; *vals gets a malloc'd copy (row-major). */
static eng_tensor_t *base_tensor(const int64_t *shape, int ndim, uint64_t seed, double **vals) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  *vals = malloc(sizeof(double) * (size_t)(n ? n : 1));
  t_random(*vals, n, seed, -10, 10);
  return t_tensor(*vals, shape, ndim, ENG_F64);
}

static double at(const eng_tensor_t *t, const int64_t *idx) {
  double v;
  T_OK(eng_tensor_get(t, idx, &v));
  return v;
}

/* Walks every index of t (row-major) and checks t[idx] == want(idx). */
typedef double (*expect_fn)(const int64_t *idx, const double *vals, const void *arg);
static void check_all(const eng_tensor_t *t, expect_fn want, const double *vals, const void *arg) {
  int64_t n = eng_tensor_numel(t), idx[ENG_MAX_DIMS] = {0};
  for (int64_t k = 0; k < n; k++) {
    double w = want(idx, vals, arg), got = at(t, idx);
    cr_assert_eq(got, w, "element %lld: %g vs %g", (long long)k, got, w);
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->shape[d]) break;
      idx[d] = 0;
    }
  }
}

static void assert_shape(const eng_tensor_t *t, const int64_t *shape, int ndim) {
  char a[128], b[128];
  cr_assert_eq(t->ndim, ndim, "%s vs %s", ENG_SHAPE_STR(t, a), eng_shape_str(shape, ndim, b, sizeof b));
  for (int d = 0; d < ndim; d++)
    cr_assert_eq(t->shape[d], shape[d], "%s vs %s", ENG_SHAPE_STR(t, a), eng_shape_str(shape, ndim, b, sizeof b));
}

/* Row-major flat position of idx in `shape`. */
static int64_t flat(const int64_t *idx, const int64_t *shape, int ndim) {
  int64_t f = 0;
  for (int d = 0; d < ndim; d++) f = f * shape[d] + idx[d];
  return f;
}

/* ---- view / reshape ---- */

typedef struct {
  const int64_t *shape;
  int ndim;
} shape_arg;

static double same_flat(const int64_t *idx, const double *vals, const void *arg) {
  const shape_arg *s = arg;
  return vals[flat(idx, s->shape, s->ndim)];
}

Test(view, reinterprets_in_row_major_order) {
  int64_t shape[2] = {3, 4};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 2, 1, &v);
  const int64_t targets[][3] = {{2, 6}, {12}, {-1, 3}, {2, 2, 3}, {1, 12}, {4, -1}};
  const int nd[] = {2, 1, 2, 3, 2, 2};
  const int64_t resolved[][3] = {{2, 6}, {12}, {4, 3}, {2, 2, 3}, {1, 12}, {4, 3}};
  for (int k = 0; k < 6; k++) {
    eng_tensor_t *w;
    T_OK(eng_tensor_view(t, targets[k], nd[k], &w));
    assert_shape(w, resolved[k], nd[k]);
    cr_assert(w->storage == t->storage && eng_tensor_is_contiguous(w));
    shape_arg s = {resolved[k], nd[k]};
    check_all(w, same_flat, v, &s);
    eng_tensor_release(w);
  }
  cr_assert_eq(t->storage->refcount, 1);
  eng_tensor_release(t);
  free(v);
}

static double transposed_flat(const int64_t *idx, const double *vals, const void *arg) {
  (void)arg; /* base [4,6]; t = base^T [6,4]; the view keeps shape [6,4] split as [3,2,4] */
  int64_t i = idx[0] * 2 + idx[1], j = idx[2];
  return vals[j * 6 + i];
}

Test(view, follows_strides_of_non_contiguous_tensors) {
  int64_t shape[2] = {4, 6};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 2, 2, &v), *tt, *w, *n;
  T_OK(eng_tensor_transpose(t, 0, 1, &tt)); /* [6,4], strides [1,6] */
  int64_t split[3] = {3, 2, 4}, flat12[1] = {24}, same[2] = {6, 4};
  T_OK(eng_tensor_view(tt, split, 3, &w)); /* splitting a dim keeps it a view */
  cr_assert(w->stride[0] == 2 && w->stride[1] == 1 && w->stride[2] == 6);
  check_all(w, transposed_flat, v, NULL);
  eng_tensor_release(w);
  T_OK(eng_tensor_view(tt, same, 2, &w));
  eng_tensor_release(w);
  T_FAILS(eng_tensor_view(tt, flat12, 1, &w), ENG_ERR_LAYOUT,
          "view: shape [24] is not compatible with the strides of a [6,4] tensor (strides [1,6]); use reshape");
  /* a column slice keeps its rows contiguous: merging rows fails, splitting them works */
  T_OK(eng_tensor_narrow(t, 1, 1, 3, &n)); /* [4,3], strides [6,1] */
  int64_t rows[3] = {2, 2, 3}, all[1] = {12};
  T_OK(eng_tensor_view(n, rows, 3, &w));
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++)
      for (int c = 0; c < 3; c++) {
        int64_t idx[3] = {a, b, c};
        cr_assert_eq(at(w, idx), v[(a * 2 + b) * 6 + 1 + c]);
      }
  eng_tensor_release(w);
  T_FAILS(eng_tensor_view(n, all, 1, &w), ENG_ERR_LAYOUT, "use reshape");
  eng_tensor_release(n);
  eng_tensor_release(tt);
  eng_tensor_release(t);
  free(v);
}

Test(view, size_one_dims_and_scalars) {
  double x = 4.5;
  eng_tensor_t *s = t_tensor(&x, NULL, 0, ENG_F64), *w, *back;
  int64_t ones[3] = {1, 1, 1};
  T_OK(eng_tensor_view(s, ones, 3, &w));
  assert_shape(w, ones, 3);
  T_OK(eng_tensor_view(w, NULL, 0, &back));
  cr_assert_eq(back->ndim, 0);
  cr_assert_eq(at(back, NULL), 4.5);
  eng_tensor_release(back);
  eng_tensor_release(w);
  eng_tensor_release(s);
}

Test(view, errors) {
  int64_t shape[2] = {3, 4}, bad[2] = {5, 2}, two[2] = {-1, -1}, neg[2] = {-2, 6}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 3, 4};
  int64_t zero[2] = {0, -1};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 2, 3, &v), *w;
  T_FAILS(eng_tensor_view(t, bad, 2, &w), ENG_ERR_SHAPE, "view: shape [5,2] is invalid for a tensor of 12 elements");
  T_FAILS(eng_tensor_view(t, two, 2, &w), ENG_ERR_ARG, "view: only one dim can be -1 in [-1,-1]");
  T_FAILS(eng_tensor_view(t, neg, 2, &w), ENG_ERR_SHAPE, "view: invalid size -2 in shape [-2,6]");
  T_FAILS(eng_tensor_view(t, nine, 9, &w), ENG_ERR_SHAPE, "view: 9 dims requested; at most 8");
  T_FAILS(eng_tensor_view(t, zero, 2, &w), ENG_ERR_SHAPE, "view: shape [0,-1] is invalid");
  int64_t seven[2] = {-1, 5};
  T_FAILS(eng_tensor_reshape(t, seven, 2, &w), ENG_ERR_SHAPE, "reshape: shape [-1,5] is invalid for a tensor of 12 elements");
  eng_tensor_release(t);
  free(v);
}

Test(reshape, views_when_possible_else_copies) {
  int64_t shape[3] = {2, 3, 5};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 3, 4, &v), *r, *tt, *c;
  int64_t to[2] = {6, -1}, to_shape[2] = {6, 5};
  T_OK(eng_tensor_reshape(t, to, 2, &r));
  cr_assert_eq(r->storage, t->storage, "a contiguous tensor reshapes as a view");
  shape_arg s = {to_shape, 2};
  check_all(r, same_flat, v, &s);
  eng_tensor_release(r);

  T_OK(eng_tensor_transpose(t, 0, 2, &tt)); /* [5,3,2] */
  int64_t flat30[1] = {30};
  T_OK(eng_tensor_reshape(tt, flat30, 1, &c));
  cr_assert(c->storage != t->storage && eng_tensor_is_contiguous(c));
  for (int64_t k = 0; k < 30; k++) {
    int64_t a = k / 6, b = k / 2 % 3, e = k % 2; /* tt[a][b][e] = t[e][b][a] */
    cr_assert_eq(at(c, &k), v[e * 15 + b * 5 + a]);
  }
  eng_tensor_release(c);
  eng_tensor_release(tt);
  eng_tensor_release(t);
  free(v);
}

/* ---- transpose / permute ---- */

Test(transpose, swaps_dims_and_strides) {
  int64_t shape[3] = {3, 5, 7};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 3, 5, &v), *w;
  T_OK(eng_tensor_transpose(t, -1, 0, &w)); /* [7,5,3] */
  int64_t want[3] = {7, 5, 3};
  assert_shape(w, want, 3);
  cr_assert(w->stride[0] == 1 && w->stride[1] == 7 && w->stride[2] == 35 && w->storage == t->storage);
  for (int64_t a = 0; a < 7; a++)
    for (int64_t b = 0; b < 5; b++)
      for (int64_t c = 0; c < 3; c++) {
        int64_t idx[3] = {a, b, c};
        cr_assert_eq(at(w, idx), v[c * 35 + b * 7 + a]);
      }
  eng_tensor_release(w);
  T_FAILS(eng_tensor_transpose(t, 0, 3, &w), ENG_ERR_INDEX, "transpose: dim 3 out of range for a 3-d tensor");
  T_FAILS(eng_tensor_transpose(t, -4, 1, &w), ENG_ERR_INDEX, "transpose: dim -4 out of range");
  eng_tensor_release(t);
  free(v);
}

Test(permute, reorders_dims) {
  int64_t shape[4] = {2, 3, 4, 5}, perm[4] = {2, 0, -1, 1};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 4, 6, &v), *w;
  T_OK(eng_tensor_permute(t, perm, 4, &w)); /* w[a][b][c][d] = t[b][d][a][c] */
  int64_t want[4] = {4, 2, 5, 3};
  assert_shape(w, want, 4);
  for (int64_t a = 0; a < 4; a++)
    for (int64_t b = 0; b < 2; b++)
      for (int64_t c = 0; c < 5; c++)
        for (int64_t d = 0; d < 3; d++) {
          int64_t idx[4] = {a, b, c, d};
          cr_assert_eq(at(w, idx), v[b * 60 + d * 20 + a * 5 + c]);
        }
  eng_tensor_release(w);
  int64_t dup[4] = {0, 0, 1, 2}, dup2[4] = {0, 1, 2, -4}, bad[4] = {0, 1, 2, 4};
  T_FAILS(eng_tensor_permute(t, dup, 4, &w), ENG_ERR_ARG, "permute: [0,0,1,2] is not a permutation of 4 dims");
  T_FAILS(eng_tensor_permute(t, dup2, 4, &w), ENG_ERR_ARG, "not a permutation");
  T_FAILS(eng_tensor_permute(t, bad, 4, &w), ENG_ERR_INDEX, "permute: dim 4 out of range");
  T_FAILS(eng_tensor_permute(t, perm, 3, &w), ENG_ERR_SHAPE, "permute: [2,0,-1] has 3 dims but the tensor has 4");
  eng_tensor_release(t);
  free(v);
}

/* ---- narrow / slice / select ---- */

Test(narrow, takes_a_range) {
  int64_t shape[2] = {7, 33};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 2, 7, &v), *w;
  const int64_t starts[] = {5, -28, 0, 33};
  const int64_t lens[] = {20, 28, 33, 0};
  for (int k = 0; k < 4; k++) {
    T_OK(eng_tensor_narrow(t, 1, starts[k], lens[k], &w));
    int64_t from = starts[k] < 0 ? starts[k] + 33 : starts[k];
    cr_assert(w->shape[0] == 7 && w->shape[1] == lens[k] && w->storage == t->storage);
    for (int64_t i = 0; i < 7; i++)
      for (int64_t j = 0; j < lens[k]; j++) {
        int64_t idx[2] = {i, j};
        cr_assert_eq(at(w, idx), v[i * 33 + from + j]);
      }
    eng_tensor_release(w);
  }
  T_FAILS(eng_tensor_narrow(t, 1, 30, 5, &w), ENG_ERR_INDEX, "narrow: start 30, length 5 do not fit dim 1 of size 33 ([7,33])");
  T_FAILS(eng_tensor_narrow(t, 0, -8, 1, &w), ENG_ERR_INDEX, "narrow: start -8");
  T_FAILS(eng_tensor_narrow(t, 0, 0, -1, &w), ENG_ERR_INDEX, "length -1");
  T_FAILS(eng_tensor_narrow(t, 2, 0, 1, &w), ENG_ERR_INDEX, "narrow: dim 2 out of range");
  eng_tensor_release(t);
  free(v);
}

/* Python's slice rule, stated the way the language reference does: bounds below -n clamp to 0,
 * negatives add n, and bounds above n clamp to n; then take a, a+step, ... < b. */
static int64_t py_bound(int64_t i, int64_t n) {
  if (i < 0) i += n;
  if (i < 0) i = 0;
  if (i > n) i = n;
  return i;
}

Test(slice, matches_python_semantics) {
  int64_t shape[2] = {3, 7};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 2, 8, &v), *w;
  for (int64_t start = -10; start <= 10; start++)
    for (int64_t stop = -10; stop <= 10; stop++)
      for (int64_t step = 1; step <= 3; step++) {
        T_OK(eng_tensor_slice(t, -1, start, stop, step, &w));
        int64_t picked[7], n = 0;
        for (int64_t j = py_bound(start, 7); j < py_bound(stop, 7); j += step) picked[n++] = j;
        cr_assert(w->ndim == 2 && w->shape[0] == 3 && w->shape[1] == n, "[%lld:%lld:%lld] gives %lld, want %lld",
                  (long long)start, (long long)stop, (long long)step, (long long)w->shape[1], (long long)n);
        for (int64_t i = 0; i < 3; i++)
          for (int64_t k = 0; k < n; k++) {
            int64_t idx[2] = {i, k};
            cr_assert_eq(at(w, idx), v[i * 7 + picked[k]]);
          }
        eng_tensor_release(w);
      }
  T_OK(eng_tensor_slice(t, 1, 0, INT64_MAX, 2, &w));
  cr_assert_eq(w->shape[1], 4);
  eng_tensor_release(w);
  T_FAILS(eng_tensor_slice(t, 1, 0, 5, 0, &w), ENG_ERR_ARG, "slice: step must be positive, got 0");
  T_FAILS(eng_tensor_slice(t, 1, 0, 5, -1, &w), ENG_ERR_ARG, "got -1");
  T_FAILS(eng_tensor_slice(t, -3, 0, 5, 1, &w), ENG_ERR_INDEX, "slice: dim -3 out of range");
  eng_tensor_release(t);
  free(v);
}

Test(select, removes_a_dim) {
  int64_t shape[3] = {3, 4, 5};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 3, 9, &v), *w;
  const int64_t dims[] = {0, 1, -1, 1};
  const int64_t index[] = {2, -1, 0, 1};
  for (int k = 0; k < 4; k++) {
    T_OK(eng_tensor_select(t, dims[k], index[k], &w));
    int d = dims[k] < 0 ? (int)dims[k] + 3 : (int)dims[k];
    int64_t i = index[k] < 0 ? index[k] + shape[d] : index[k];
    cr_assert_eq(w->ndim, 2);
    for (int64_t a = 0; a < w->shape[0]; a++)
      for (int64_t b = 0; b < w->shape[1]; b++) {
        int64_t full[3], o = 0, idx[2] = {a, b};
        for (int e = 0; e < 3; e++) full[e] = e == d ? i : idx[o++];
        cr_assert_eq(at(w, idx), v[full[0] * 20 + full[1] * 5 + full[2]]);
      }
    eng_tensor_release(w);
  }
  T_FAILS(eng_tensor_select(t, 1, 4, &w), ENG_ERR_INDEX, "select: index 4 out of range for dim 1 of size 4 ([3,4,5])");
  T_FAILS(eng_tensor_select(t, 0, -4, &w), ENG_ERR_INDEX, "select: index -4 out of range");
  T_FAILS(eng_tensor_select(t, 3, 0, &w), ENG_ERR_INDEX, "select: dim 3 out of range");
  eng_tensor_release(t);
  free(v);
}

/* ---- squeeze / unsqueeze / expand ---- */

Test(squeeze, drops_size_one_dims) {
  int64_t shape[4] = {1, 3, 1, 5};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 4, 10, &v), *w;
  int64_t all[2] = {3, 5}, at2[3] = {1, 3, 5};
  T_OK(eng_tensor_squeeze(t, 0, 1, &w));
  assert_shape(w, all, 2);
  shape_arg s = {all, 2};
  check_all(w, same_flat, v, &s);
  eng_tensor_release(w);
  T_OK(eng_tensor_squeeze(t, -2, 0, &w));
  assert_shape(w, at2, 3);
  eng_tensor_release(w);
  T_OK(eng_tensor_squeeze(t, 1, 0, &w)); /* size 3: left as is */
  assert_shape(w, shape, 4);
  eng_tensor_release(w);
  T_FAILS(eng_tensor_squeeze(t, 4, 0, &w), ENG_ERR_INDEX, "squeeze: dim 4 out of range for a 4-d tensor");
  eng_tensor_release(t);
  free(v);
}

Test(unsqueeze, inserts_a_size_one_dim) {
  int64_t shape[2] = {3, 5};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 2, 11, &v), *w;
  const int64_t dims[] = {0, 1, 2, -1, -3};
  const int64_t want[][3] = {{1, 3, 5}, {3, 1, 5}, {3, 5, 1}, {3, 5, 1}, {1, 3, 5}};
  for (int k = 0; k < 5; k++) {
    T_OK(eng_tensor_unsqueeze(t, dims[k], &w));
    assert_shape(w, want[k], 3);
    cr_assert(eng_tensor_is_contiguous(w) && w->storage == t->storage);
    shape_arg s = {want[k], 3};
    check_all(w, same_flat, v, &s);
    eng_tensor_release(w);
  }
  T_FAILS(eng_tensor_unsqueeze(t, 3, &w), ENG_ERR_INDEX, "unsqueeze: dim 3 out of range for a 2-d tensor (expected -3..2)");
  T_FAILS(eng_tensor_unsqueeze(t, -4, &w), ENG_ERR_INDEX, "unsqueeze: dim -4");
  int64_t eight[8] = {1, 1, 1, 1, 1, 1, 1, 2};
  eng_tensor_t *e;
  T_OK(eng_tensor_zeros(eight, 8, ENG_F32, ENG_CPU_DEVICE, &e));
  T_FAILS(eng_tensor_unsqueeze(e, 0, &w), ENG_ERR_SHAPE, "unsqueeze: a 8-d tensor cannot get another dim");
  eng_tensor_release(e);
  eng_tensor_release(t);
  free(v);
}

Test(expand, broadcasts_with_zero_strides) {
  int64_t shape[2] = {3, 1};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 2, 12, &v), *w;
  int64_t to[3] = {2, 3, 4}, keep[3] = {2, -1, 4};
  for (int k = 0; k < 2; k++) {
    T_OK(eng_tensor_expand(t, k ? keep : to, 3, &w));
    assert_shape(w, to, 3);
    cr_assert(w->stride[0] == 0 && w->stride[2] == 0 && w->storage == t->storage);
    for (int64_t a = 0; a < 2; a++)
      for (int64_t b = 0; b < 3; b++)
        for (int64_t c = 0; c < 4; c++) {
          int64_t idx[3] = {a, b, c};
          cr_assert_eq(at(w, idx), v[b]);
        }
    eng_tensor_release(w);
  }
  int64_t bad[2] = {4, 4}, fewer[1] = {3}, lead[3] = {-1, 3, 1}, neg[2] = {3, -2}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 3, 1};
  T_FAILS(eng_tensor_expand(t, bad, 2, &w), ENG_ERR_SHAPE, "expand: cannot expand [3,1] to [4,4]: dim 0 has size 3, not 1");
  T_FAILS(eng_tensor_expand(t, fewer, 1, &w), ENG_ERR_SHAPE, "expand: the shape [3] has fewer dims than the [3,1] tensor");
  T_FAILS(eng_tensor_expand(t, lead, 3, &w), ENG_ERR_SHAPE, "expand: invalid size -1 for dim 0 in [-1,3,1]");
  T_FAILS(eng_tensor_expand(t, neg, 2, &w), ENG_ERR_SHAPE, "expand: invalid size -2");
  T_FAILS(eng_tensor_expand(t, nine, 9, &w), ENG_ERR_SHAPE, "expand: 9 dims requested");
  eng_tensor_release(t);
  free(v);
}

/* ---- split / chunk ---- */

/* Checks pieces of t along dim 0 against expected lengths, and their values. */
static void check_pieces(eng_tensor_t **p, int n, const int64_t *lens, int want_n, const double *v, int64_t cols) {
  cr_assert_eq(n, want_n);
  int64_t row = 0;
  for (int k = 0; k < n; k++) {
    cr_assert(p[k]->shape[0] == lens[k] && p[k]->shape[1] == cols, "piece %d has %lld rows, want %lld", k,
              (long long)p[k]->shape[0], (long long)lens[k]);
    for (int64_t i = 0; i < lens[k]; i++)
      for (int64_t j = 0; j < cols; j++) {
        int64_t idx[2] = {i, j};
        cr_assert_eq(at(p[k], idx), v[(row + i) * cols + j]);
      }
    row += lens[k];
    eng_tensor_release(p[k]);
  }
  free(p);
}

Test(split, equal_pieces_and_a_short_last_one) {
  int64_t shape[2] = {10, 3};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 2, 13, &v), **p;
  int n;
  T_OK(eng_tensor_split(t, 3, 0, &p, &n));
  check_pieces(p, n, (const int64_t[]){3, 3, 3, 1}, 4, v, 3);
  T_OK(eng_tensor_split(t, 10, -2, &p, &n));
  check_pieces(p, n, (const int64_t[]){10}, 1, v, 3);
  T_OK(eng_tensor_split(t, 25, 0, &p, &n));
  check_pieces(p, n, (const int64_t[]){10}, 1, v, 3);
  T_FAILS(eng_tensor_split(t, 0, 0, &p, &n), ENG_ERR_ARG, "split: size must be positive, got 0 (dim 0 has size 10)");
  T_FAILS(eng_tensor_split(t, -1, 0, &p, &n), ENG_ERR_ARG, "got -1");
  T_FAILS(eng_tensor_split(t, 1, 2, &p, &n), ENG_ERR_INDEX, "split: dim 2 out of range");
  int64_t empty[2] = {0, 3};
  eng_tensor_t *e;
  T_OK(eng_tensor_empty(empty, 2, ENG_F64, ENG_CPU_DEVICE, &e));
  T_OK(eng_tensor_split(e, 0, 0, &p, &n)); /* torch: one empty piece */
  check_pieces(p, n, (const int64_t[]){0}, 1, v, 3);
  eng_tensor_release(e);
  eng_tensor_release(t);
  free(v);
}

Test(chunk, torch_semantics) {
  int64_t shape[2] = {10, 3};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 2, 14, &v), **p;
  int n;
  T_OK(eng_tensor_chunk(t, 4, 0, &p, &n)); /* ceil(10/4) = 3 */
  check_pieces(p, n, (const int64_t[]){3, 3, 3, 1}, 4, v, 3);
  T_OK(eng_tensor_chunk(t, 6, 0, &p, &n)); /* pieces of 2: only 5 of them */
  check_pieces(p, n, (const int64_t[]){2, 2, 2, 2, 2}, 5, v, 3);
  T_OK(eng_tensor_chunk(t, 1, 0, &p, &n));
  check_pieces(p, n, (const int64_t[]){10}, 1, v, 3);
  T_OK(eng_tensor_chunk(t, 33, 0, &p, &n));
  check_pieces(p, n, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 10, v, 3);
  T_FAILS(eng_tensor_chunk(t, 0, 0, &p, &n), ENG_ERR_ARG, "chunk: chunks must be positive, got 0");
  T_FAILS(eng_tensor_chunk(t, 2, -3, &p, &n), ENG_ERR_INDEX, "chunk: dim -3 out of range");
  int64_t empty[2] = {0, 3};
  eng_tensor_t *e;
  T_OK(eng_tensor_empty(empty, 2, ENG_F64, ENG_CPU_DEVICE, &e));
  T_OK(eng_tensor_chunk(e, 3, 0, &p, &n)); /* torch: `chunks` empty pieces */
  check_pieces(p, n, (const int64_t[]){0, 0, 0}, 3, v, 3);
  eng_tensor_release(e);
  eng_tensor_release(t);
  free(v);
}

/* ---- broadcasting ---- */

static eng_tensor_t *shaped(const int64_t *shape, int ndim) {
  eng_tensor_t *t;
  T_OK(eng_tensor_empty(shape, ndim, ENG_F32, ENG_CPU_DEVICE, &t));
  return t;
}

Test(broadcast, shapes_align_from_the_right) {
  int64_t a[3] = {2, 1, 3}, b[2] = {4, 3}, c[1] = {5}, d[2] = {0, 1}, e[1] = {3}, f[4] = {7, 1, 1, 1};
  eng_tensor_t *ta = shaped(a, 3), *tb = shaped(b, 2), *tc = shaped(c, 1), *td = shaped(d, 2), *te = shaped(e, 1);
  eng_tensor_t *tf = shaped(f, 4), *scalar = shaped(NULL, 0);
  int64_t out[ENG_MAX_DIMS];
  int nd;
  const eng_tensor_t *ab[2] = {ta, tb};
  T_OK(eng_broadcast_shapes("add", ab, 2, out, &nd));
  assert_shape(&(eng_tensor_t){.ndim = nd, .shape = {out[0], out[1], out[2]}}, (int64_t[]){2, 4, 3}, 3);
  const eng_tensor_t *sc[2] = {scalar, tc};
  T_OK(eng_broadcast_shapes("mul", sc, 2, out, &nd));
  cr_assert(nd == 1 && out[0] == 5);
  const eng_tensor_t *de[2] = {td, te};
  T_OK(eng_broadcast_shapes("add", de, 2, out, &nd));
  cr_assert(nd == 2 && out[0] == 0 && out[1] == 3);
  const eng_tensor_t *three[4] = {ta, NULL, tb, tf};
  T_OK(eng_broadcast_shapes("where", three, 4, out, &nd));
  cr_assert(nd == 4 && out[0] == 7 && out[1] == 2 && out[2] == 4 && out[3] == 3);
  int64_t x[2] = {2, 3}, y[1] = {4};
  eng_tensor_t *tx = shaped(x, 2), *ty = shaped(y, 1);
  const eng_tensor_t *xy[2] = {tx, ty}, *bxc[3] = {tb, tx, tc};
  T_FAILS(eng_broadcast_shapes("add", xy, 2, out, &nd), ENG_ERR_SHAPE, "add: shapes [2,3] and [4] cannot be broadcast");
  T_FAILS(eng_broadcast_shapes("where", bxc, 3, out, &nd), ENG_ERR_SHAPE, "where: shapes [4,3] and [2,3] cannot be broadcast");
  eng_tensor_t *all[] = {ta, tb, tc, td, te, tf, scalar, tx, ty};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) eng_tensor_release(all[k]);
}

/* ---- a chain of views, then a copy ---- */

Test(views, chain_then_contiguous_matches_index_arithmetic) {
  int64_t shape[3] = {4, 7, 9};
  double *v;
  eng_tensor_t *t = base_tensor(shape, 3, 15, &v), *a, *b, *c, *d, *e;
  T_OK(eng_tensor_permute(t, (const int64_t[]){2, 0, 1}, 3, &a)); /* [9,4,7]: a[i][j][k] = t[j][k][i] */
  T_OK(eng_tensor_slice(a, 0, 1, 9, 3, &b));                     /* i = 1,4,7 */
  T_OK(eng_tensor_select(b, 2, -2, &c));                          /* k = 5 -> [3,4] */
  T_OK(eng_tensor_unsqueeze(c, 1, &d));                           /* [3,1,4] */
  T_OK(eng_tensor_contiguous(d, &e));
  cr_assert(eng_tensor_is_contiguous(e) && e->shape[0] == 3 && e->shape[1] == 1 && e->shape[2] == 4);
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 4; j++) {
      int64_t idx[3] = {i, 0, j};
      cr_assert_eq(at(e, idx), v[j * 63 + 5 * 9 + (1 + 3 * i)]);
    }
  eng_tensor_t *all[] = {e, d, c, b, a};
  for (int k = 0; k < 5; k++) eng_tensor_release(all[k]);
  cr_assert_eq(t->storage->refcount, 1);
  eng_tensor_release(t);
  free(v);
}
