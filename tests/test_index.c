/* embedding, index_select, gather, cat and stack against loops written here, for every data
 * dtype, every index dtype, non-contiguous inputs and empty pieces; and every error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"
#include "support.h"

static const eng_dtype_t ALL[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16, ENG_I32, ENG_I64, ENG_U8};
static const eng_dtype_t INDEX_DTYPES[] = {ENG_I64, ENG_I32, ENG_U8};
#define N_ALL (sizeof ALL / sizeof *ALL)
#define N_INDEX (sizeof INDEX_DTYPES / sizeof *INDEX_DTYPES)

/* Random data of any dtype (integers in a range every integer dtype holds). */
static eng_tensor_t *rand_data(const int64_t *shape, int nd, eng_dtype_t dt, uint64_t seed) {
  return eng_dtype_is_float(dt) ? t_rand_tensor(shape, nd, dt, seed, -1, 1)
                                : t_rand_tensor(shape, nd, dt, seed, 0, 200);
}

/* Random integers in [0, limit) as a tensor of dtype dt; their values go to *vals (malloc'd). */
static eng_tensor_t *rand_index(const int64_t *shape, int nd, eng_dtype_t dt, int64_t limit,
                                uint64_t seed, double **vals) {
  int64_t n = t_numel(shape, nd);
  double *v = malloc(sizeof(double) * (size_t)(n + 1));
  t_random(v, n, seed, 0, (double)limit);
  for (int64_t i = 0; i < n; i++) v[i] = floor(v[i]);
  eng_tensor_t *t = t_tensor(v, shape, nd, dt);
  if (vals) *vals = v;
  else free(v);
  return t;
}

static void assert_shape(const eng_tensor_t *t, const int64_t *shape, int nd) {
  char a[128], b[128];
  cr_assert(t->ndim == nd && memcmp(t->shape, shape, sizeof(int64_t) * (size_t)nd) == 0,
            "shape %s, want %s", ENG_SHAPE_STR(t, a), eng_shape_str(shape, nd, b, sizeof b));
}

static void release_all(eng_tensor_t **ts, size_t n) {
  for (size_t i = 0; i < n; i++) eng_tensor_release(ts[i]);
}

/* ---- embedding ---- */

/* out[p, r] == weight[ids[p], r] for every id p and every element r of a row. */
static void check_embedding(eng_tensor_t *ids, eng_tensor_t *w) {
  eng_tensor_t *out = NULL;
  T_OK(eng_op_embedding(ids, w, &out));
  int64_t want[2 * ENG_MAX_DIMS];
  memcpy(want, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
  memcpy(want + ids->ndim, w->shape + 1, sizeof(int64_t) * (size_t)(w->ndim - 1));
  assert_shape(out, want, ids->ndim + w->ndim - 1);
  cr_assert_eq(out->dtype, w->dtype);
  double *iv = t_values(ids), *wv = t_values(w), *ov = t_values(out);
  int64_t row = t_numel(w->shape + 1, w->ndim - 1), n = eng_tensor_numel(ids);
  for (int64_t p = 0; p < n; p++)
    for (int64_t r = 0; r < row; r++)
      cr_assert_eq(ov[p * row + r], wv[(int64_t)iv[p] * row + r], "%s: id %lld elem %lld",
                   eng_dtype_name(w->dtype), (long long)p, (long long)r);
  free(iv);
  free(wv);
  free(ov);
  eng_tensor_release(out);
}

Test(index, embedding_all_dtypes) {
  for (size_t d = 0; d < N_ALL; d++) {
    for (size_t k = 0; k < N_INDEX; k++) {
      int64_t ws[2] = {11, 7}, is[2] = {3, 5};
      eng_tensor_t *w = rand_data(ws, 2, ALL[d], 10 + d);
      eng_tensor_t *ids = rand_index(is, 2, INDEX_DTYPES[k], 11, 20 + k, NULL);
      check_embedding(ids, w);
      eng_tensor_release(w);
      eng_tensor_release(ids);
    }
  }
}

Test(index, embedding_shapes_and_views) {
  /* rows of several dims; 0-d, 1-D and empty ids */
  int64_t w3s[3] = {6, 2, 3}, none[1] = {0}, four[1] = {4}, empty[1] = {0};
  eng_tensor_t *w3 = rand_data(w3s, 3, ENG_F32, 1);
  eng_tensor_t *id0 = rand_index(none, 0, ENG_I64, 6, 2, NULL), *id4 = rand_index(four, 1, ENG_I32, 6, 3, NULL);
  eng_tensor_t *id_empty = rand_index(empty, 1, ENG_I64, 6, 4, NULL);
  check_embedding(id0, w3);
  check_embedding(id4, w3);
  check_embedding(id_empty, w3);

  /* a transposed table and transposed ids; a 1-D table gives one value per id */
  int64_t wt_s[2] = {7, 33}, it_s[2] = {5, 3}, v_s[1] = {9};
  eng_tensor_t *wt = rand_data(wt_s, 2, ENG_BF16, 5), *w, *it = rand_index(it_s, 2, ENG_I64, 33, 6, NULL), *ids;
  T_OK(eng_tensor_transpose(wt, 0, 1, &w));   /* [33,7] */
  T_OK(eng_tensor_transpose(it, 0, 1, &ids)); /* [3,5] */
  check_embedding(ids, w);
  eng_tensor_t *vec = rand_data(v_s, 1, ENG_F64, 7), *idv = rand_index(it_s, 2, ENG_U8, 9, 8, NULL);
  check_embedding(idv, vec);
  eng_tensor_t *all[] = {w3, id0, id4, id_empty, wt, w, it, ids, vec, idv};
  release_all(all, sizeof all / sizeof *all);
}

Test(index, embedding_errors) {
  int64_t ws[2] = {256, 2}, three[1] = {3}, none[1] = {0};
  double bad_ids[3] = {1, 300, 2}, neg_ids[2] = {0, -1}, two[2] = {2, 1};
  eng_tensor_t *w = rand_data(ws, 2, ENG_F32, 1), *out = NULL;
  eng_tensor_t *ids = t_tensor(bad_ids, three, 1, ENG_I64);
  T_FAILS(eng_op_embedding(ids, w, &out), ENG_ERR_INDEX, "embedding: id 300 out of range for 256 rows");
  cr_assert_null(out);
  int64_t n2[1] = {2};
  eng_tensor_t *neg = t_tensor(neg_ids, n2, 1, ENG_I32);
  T_FAILS(eng_op_embedding(neg, w, &out), ENG_ERR_INDEX, "embedding: id -1 out of range for 256 rows");
  eng_tensor_t *fids = t_tensor(bad_ids, three, 1, ENG_F32);
  T_FAILS(eng_op_embedding(fids, w, &out), ENG_ERR_DTYPE, "embedding: ids must be an integer tensor (i32, i64 or u8), got f32");
  eng_tensor_t *w0 = t_tensor(two, none, 0, ENG_F32), *id1 = t_tensor(two, n2, 1, ENG_I64);
  T_FAILS(eng_op_embedding(id1, w0, &out), ENG_ERR_SHAPE, "embedding: weight needs at least 1 dim, got []");
  int64_t ones8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  eng_tensor_t *id8 = rand_index(ones8, 8, ENG_I64, 256, 2, NULL);
  T_FAILS(eng_op_embedding(id8, w, &out), ENG_ERR_SHAPE, "embedding: result would have 9 dims (max 8)");
  T_FAILS(eng_op_embedding(NULL, w, &out), ENG_ERR_ARG, "embedding: missing argument");
  eng_tensor_t *all[] = {w, ids, neg, fids, w0, id1, id8};
  release_all(all, sizeof all / sizeof *all);
}

/* ---- index_select and gather ---- */

/* out[c] == x[c with c[dim] replaced by the index]: idx[c[dim]] for index_select, idx[c] for
 * gather (whose index has the output's shape). */
static void check_along(const eng_tensor_t *out, const eng_tensor_t *x, int dim, const double *idx, int gather) {
  double *xv = t_values(x), *ov = t_values(out);
  int64_t n = eng_tensor_numel(out), c[ENG_MAX_DIMS];
  for (int64_t f = 0; f < n; f++) {
    t_coords(f, out->shape, out->ndim, c);
    c[dim] = (int64_t)(gather ? idx[f] : idx[c[dim]]);
    cr_assert_eq(ov[f], xv[t_flat_index(c, x->shape, x->ndim)], "%s dim %d: element %lld",
                 eng_dtype_name(x->dtype), dim, (long long)f);
  }
  free(xv);
  free(ov);
}

Test(index, index_select_all_dtypes_and_dims) {
  int64_t xs[3] = {5, 7, 3};
  for (size_t d = 0; d < N_ALL; d++) {
    eng_tensor_t *x = rand_data(xs, 3, ALL[d], 30 + d);
    for (int dim = -1; dim < 3; dim++) {
      int nd = dim < 0 ? dim + 3 : dim;
      int64_t len[1] = {9}; /* longer than the dim: repeats */
      double *iv;
      eng_tensor_t *idx = rand_index(len, 1, INDEX_DTYPES[(d + (size_t)nd) % N_INDEX], xs[nd], 40 + (uint64_t)nd, &iv);
      eng_tensor_t *out = NULL;
      T_OK(eng_op_index_select(x, dim, idx, &out));
      int64_t want[3] = {5, 7, 3};
      want[nd] = 9;
      assert_shape(out, want, 3);
      check_along(out, x, nd, iv, 0);
      free(iv);
      eng_tensor_release(idx);
      eng_tensor_release(out);
    }
    eng_tensor_release(x);
  }
}

Test(index, index_select_views_and_empty) {
  int64_t xs[2] = {6, 33}, ls[1] = {14}, e[1] = {0};
  eng_tensor_t *base = rand_data(xs, 2, ENG_F32, 1), *x, *idx_base, *idx;
  T_OK(eng_tensor_transpose(base, 0, 1, &x)); /* [33,6] */
  double *iv_base;
  idx_base = rand_index(ls, 1, ENG_I64, 33, 2, &iv_base);
  T_OK(eng_tensor_slice(idx_base, 0, 1, 14, 2, &idx)); /* 7 entries, stride 2 */
  double iv[7];
  for (int i = 0; i < 7; i++) iv[i] = iv_base[1 + 2 * i];
  eng_tensor_t *out = NULL;
  T_OK(eng_op_index_select(x, 0, idx, &out));
  int64_t want[2] = {7, 6};
  assert_shape(out, want, 2);
  check_along(out, x, 0, iv, 0);
  eng_tensor_release(out);

  eng_tensor_t *none = rand_index(e, 1, ENG_I32, 1, 3, NULL);
  T_OK(eng_op_index_select(x, 1, none, &out));
  int64_t want0[2] = {33, 0};
  assert_shape(out, want0, 2);
  free(iv_base);
  eng_tensor_t *all[] = {base, x, idx_base, idx, none, out};
  release_all(all, sizeof all / sizeof *all);
}

Test(index, index_select_errors) {
  int64_t xs[3] = {5, 7, 3}, n2[1] = {2}, s22[2] = {2, 2};
  double over[2] = {0, 7}, neg[2] = {-1, 0}, four[4] = {0, 1, 2, 3};
  eng_tensor_t *x = rand_data(xs, 3, ENG_F32, 1), *out = NULL;
  eng_tensor_t *i_over = t_tensor(over, n2, 1, ENG_I64), *i_neg = t_tensor(neg, n2, 1, ENG_I32);
  T_FAILS(eng_op_index_select(x, 1, i_over, &out), ENG_ERR_INDEX, "index_select: index 7 out of range for dim 1 of size 7");
  T_FAILS(eng_op_index_select(x, 0, i_neg, &out), ENG_ERR_INDEX, "index_select: index -1 out of range for dim 0 of size 5");
  eng_tensor_t *i2d = t_tensor(four, s22, 2, ENG_I64), *ifl = t_tensor(over, n2, 1, ENG_F64);
  T_FAILS(eng_op_index_select(x, 0, i2d, &out), ENG_ERR_SHAPE, "index_select: index must be 1-D, got [2,2]");
  T_FAILS(eng_op_index_select(x, 0, ifl, &out), ENG_ERR_DTYPE, "index_select: index must be an integer tensor (i32, i64 or u8), got f64");
  T_FAILS(eng_op_index_select(x, 3, i_neg, &out), ENG_ERR_INDEX, "index_select: dim 3 out of range");
  T_FAILS(eng_op_index_select(NULL, 0, i_neg, &out), ENG_ERR_ARG, "index_select: missing argument");
  cr_assert_null(out);
  /* the registry path checks the dim it is given */
  eng_tensor_t *in[2] = {x, i_over};
  eng_op_call_t call = {.id = ENG_OP_INDEX_SELECT, .n_in = 2, .in = in};
  call.attrs.i[0] = 5;
  T_FAILS(eng_op_dispatch(&call), ENG_ERR_INDEX, "index_select: dim 5 out of range for input [5,7,3]");
  eng_tensor_t *all[] = {x, i_over, i_neg, i2d, ifl};
  release_all(all, sizeof all / sizeof *all);
}

Test(index, gather_all_dtypes_and_dims) {
  int64_t xs[3] = {4, 6, 5};
  for (size_t d = 0; d < N_ALL; d++) {
    eng_tensor_t *x = rand_data(xs, 3, ALL[d], 50 + d);
    for (int dim = 0; dim < 3; dim++) {
      /* smaller than x off the dim, larger along it */
      int64_t is[3] = {3, 4, 2};
      is[dim] = 7;
      double *iv;
      eng_tensor_t *idx = rand_index(is, 3, INDEX_DTYPES[(d + (size_t)dim) % N_INDEX], xs[dim], 60 + (uint64_t)dim, &iv);
      eng_tensor_t *out = NULL;
      T_OK(eng_op_gather(x, dim - 3 * (dim == 2), idx, &out)); /* dim 2 passed as -1 */
      assert_shape(out, is, 3);
      cr_assert_eq(out->dtype, x->dtype);
      check_along(out, x, dim, iv, 1);
      free(iv);
      eng_tensor_release(idx);
      eng_tensor_release(out);
    }
    eng_tensor_release(x);
  }
}

Test(index, gather_views) {
  int64_t xs[2] = {9, 4}, is[2] = {3, 9};
  eng_tensor_t *xb = rand_data(xs, 2, ENG_F16, 1), *x, *ib, *idx, *out = NULL;
  T_OK(eng_tensor_transpose(xb, 0, 1, &x)); /* [4,9] */
  double *ivb;
  ib = rand_index(is, 2, ENG_I64, 9, 2, &ivb);
  T_OK(eng_tensor_transpose(ib, 0, 1, &idx)); /* [9,3] */
  eng_tensor_t *idx43;
  T_OK(eng_tensor_narrow(idx, 0, 2, 4, &idx43)); /* [4,3] with strides (1, 9): idx43[r][c] = ib[c][r+2] */
  double iv[12];
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 3; c++) iv[r * 3 + c] = ivb[c * 9 + (r + 2)];
  T_OK(eng_op_gather(x, 1, idx43, &out));
  int64_t want[2] = {4, 3};
  assert_shape(out, want, 2);
  check_along(out, x, 1, iv, 1);
  free(ivb);
  eng_tensor_t *all[] = {xb, x, ib, idx, idx43, out};
  release_all(all, sizeof all / sizeof *all);
}

Test(index, gather_errors) {
  int64_t xs[3] = {4, 6, 5}, s2[2] = {4, 6}, big[3] = {4, 7, 5}, ok[3] = {1, 1, 2};
  eng_tensor_t *x = rand_data(xs, 3, ENG_F64, 1), *out = NULL;
  eng_tensor_t *i2 = rand_index(s2, 2, ENG_I64, 4, 2, NULL), *ibig = rand_index(big, 3, ENG_I64, 4, 3, NULL);
  T_FAILS(eng_op_gather(x, 0, i2, &out), ENG_ERR_SHAPE, "gather: index [4,6] and input [4,6,5] need the same number of dims");
  T_FAILS(eng_op_gather(x, 0, ibig, &out), ENG_ERR_SHAPE, "gather: index [4,7,5] is larger than input [4,6,5] at dim 1");
  double vals[2] = {3, 4};
  eng_tensor_t *iover = t_tensor(vals, ok, 3, ENG_U8), *ifl = t_tensor(vals, ok, 3, ENG_BF16);
  T_FAILS(eng_op_gather(x, 0, iover, &out), ENG_ERR_INDEX, "gather: index 4 out of range for dim 0 of size 4");
  T_FAILS(eng_op_gather(x, 0, ifl, &out), ENG_ERR_DTYPE, "gather: index must be an integer tensor (i32, i64 or u8), got bf16");
  T_FAILS(eng_op_gather(x, -4, iover, &out), ENG_ERR_INDEX, "gather: dim -4 out of range");
  T_FAILS(eng_op_gather(x, 0, NULL, &out), ENG_ERR_ARG, "gather: missing argument");
  cr_assert_null(out);
  eng_tensor_t *all[] = {x, i2, ibig, iover, ifl};
  release_all(all, sizeof all / sizeof *all);
}

/* A caller's preset output must match what the shape rule says: the kernels write it densely. */
Test(index, preset_outputs_are_checked) {
  int64_t xs[2] = {4, 3}, is[1] = {2}, wrong[2] = {2, 3};
  eng_tensor_t *x = rand_data(xs, 2, ENG_F32, 1), *idx = rand_index(is, 1, ENG_I64, 4, 2, NULL);
  eng_tensor_t *out64 = rand_data(wrong, 2, ENG_F64, 3), *in[2] = {idx, x}, *in_sel[2] = {x, idx};
  eng_op_call_t emb = {.id = ENG_OP_EMBEDDING, .n_in = 2, .in = in, .n_out = 1, .out = {out64}};
  T_FAILS(eng_op_dispatch(&emb), ENG_ERR_SHAPE, "embedding: the output must be a contiguous f32 [2,3], got a f64 [2,3]");
  eng_op_call_t sel = {.id = ENG_OP_INDEX_SELECT, .n_in = 2, .in = in_sel, .n_out = 1, .out = {out64}};
  T_FAILS(eng_op_dispatch(&sel), ENG_ERR_SHAPE, "index_select: the output must be a contiguous f32 [2,3]");
  int64_t gs[2] = {2, 3};
  eng_tensor_t *gidx = rand_index(gs, 2, ENG_I32, 4, 4, NULL), *in_g[2] = {x, gidx};
  eng_op_call_t gat = {.id = ENG_OP_GATHER, .n_in = 2, .in = in_g, .n_out = 1, .out = {out64}};
  T_FAILS(eng_op_dispatch(&gat), ENG_ERR_SHAPE, "gather: the output must be a contiguous f32 [2,3]");
  eng_tensor_t *in_c[2] = {x, x};
  eng_op_call_t cat = {.id = ENG_OP_CAT, .n_in = 2, .in = in_c, .n_out = 1, .out = {out64}};
  T_FAILS(eng_op_dispatch(&cat), ENG_ERR_SHAPE, "cat: the output must be a contiguous f32 [8,3]");
  eng_tensor_t *all[] = {x, idx, out64, gidx};
  release_all(all, sizeof all / sizeof *all);
}

/* ---- cat and stack ---- */

/* out (cat of n pieces along dim) against the pieces' values, converted exactly. */
static void check_cat(const eng_tensor_t *out, eng_tensor_t *const *ts, int n, int dim) {
  double *ov = t_values(out), *pv[8] = {0};
  for (int k = 0; k < n; k++) pv[k] = t_values(ts[k]);
  int64_t total = eng_tensor_numel(out), c[ENG_MAX_DIMS];
  for (int64_t f = 0; f < total; f++) {
    t_coords(f, out->shape, out->ndim, c);
    int k = 0;
    while (c[dim] >= ts[k]->shape[dim]) c[dim] -= ts[k++]->shape[dim];
    cr_assert_eq(ov[f], pv[k][t_flat_index(c, ts[k]->shape, ts[k]->ndim)], "element %lld (piece %d)", (long long)f, k);
  }
  free(ov);
  for (int k = 0; k < n; k++) free(pv[k]);
}

Test(cat, all_dtypes_with_an_empty_piece) {
  int64_t a[3] = {3, 2, 5}, b[3] = {3, 0, 5}, c[3] = {3, 4, 5};
  for (size_t d = 0; d < N_ALL; d++) {
    eng_tensor_t *ts[3] = {rand_data(a, 3, ALL[d], 1), rand_data(b, 3, ALL[d], 2), rand_data(c, 3, ALL[d], 3)};
    for (int dim = -2; dim <= 1; dim += 3) {
      eng_tensor_t *out = NULL;
      T_OK(eng_op_cat(ts, 3, dim, &out));
      int64_t want[3] = {3, 6, 5};
      assert_shape(out, want, 3);
      cr_assert_eq(out->dtype, ALL[d]);
      check_cat(out, ts, 3, 1);
      eng_tensor_release(out);
    }
    release_all(ts, 3);
  }
}

Test(cat, views_dims_and_promotion) {
  int64_t s75[2] = {7, 5}, s53[2] = {5, 3}, s33x5[2] = {33, 5};
  eng_tensor_t *x = rand_data(s75, 2, ENG_F32, 1), *y = rand_data(s53, 2, ENG_F64, 2), *z = rand_data(s33x5, 2, ENG_I32, 3);
  eng_tensor_t *yt, *zs;
  T_OK(eng_tensor_transpose(y, 0, 1, &yt));           /* [3,5] */
  T_OK(eng_tensor_slice(z, 0, 0, 33, 3, &zs));        /* [11,5], stride 15 */
  eng_tensor_t *ts[3] = {x, yt, zs}, *out = NULL;
  T_OK(eng_op_cat(ts, 3, 0, &out));
  int64_t want[2] = {21, 5};
  assert_shape(out, want, 2);
  cr_assert_eq(out->dtype, ENG_F64);
  check_cat(out, ts, 3, 0);
  eng_tensor_release(out);

  /* along the last dim; half types promote to f32; u8 with i32 gives i32 */
  int64_t s4x3[2] = {4, 3}, s4x1[2] = {4, 1};
  eng_tensor_t *h = rand_data(s4x3, 2, ENG_F16, 4), *bh = rand_data(s4x1, 2, ENG_BF16, 5);
  eng_tensor_t *hs[2] = {h, bh};
  T_OK(eng_op_cat(hs, 2, -1, &out));
  cr_assert_eq(out->dtype, ENG_F32);
  int64_t want44[2] = {4, 4};
  assert_shape(out, want44, 2);
  check_cat(out, hs, 2, 1);
  eng_tensor_release(out);
  eng_tensor_t *u = rand_data(s4x3, 2, ENG_U8, 6), *i = rand_data(s4x1, 2, ENG_I32, 7), *ui[2] = {u, i};
  T_OK(eng_op_cat(ui, 2, 1, &out));
  cr_assert_eq(out->dtype, ENG_I32);
  check_cat(out, ui, 2, 1);
  eng_tensor_release(out);

  /* one piece is a copy */
  T_OK(eng_op_cat(&x, 1, 0, &out));
  assert_shape(out, s75, 2);
  check_cat(out, &x, 1, 0);
  eng_tensor_release(out);
  eng_tensor_t *all[] = {x, y, z, yt, zs, h, bh, u, i};
  release_all(all, sizeof all / sizeof *all);
}

Test(cat, errors) {
  int64_t a[3] = {3, 2, 5}, b[2] = {3, 2}, c[3] = {4, 2, 5}, none[1] = {0};
  double one = 1;
  eng_tensor_t *x = rand_data(a, 3, ENG_F32, 1), *y = rand_data(b, 2, ENG_F32, 2), *z = rand_data(c, 3, ENG_F32, 3);
  eng_tensor_t *s = t_tensor(&one, none, 0, ENG_F32), *out = NULL;
  T_FAILS(eng_op_cat(&x, 0, 0, &out), ENG_ERR_ARG, "cat: needs at least one tensor");
  eng_tensor_t *with_null[2] = {x, NULL}, *mixed_nd[2] = {x, y}, *mismatch[2] = {x, z}, *scalars[2] = {s, s};
  T_FAILS(eng_op_cat(with_null, 2, 0, &out), ENG_ERR_ARG, "cat: tensor 1 is missing");
  T_FAILS(eng_op_cat(scalars, 2, 0, &out), ENG_ERR_SHAPE, "cat: tensor 0 is zero-dimensional ([]) and cannot be concatenated");
  T_FAILS(eng_op_cat(mixed_nd, 2, 0, &out), ENG_ERR_SHAPE, "cat: tensors need the same number of dims: tensor 0 is [3,2,5], tensor 1 is [3,2]");
  T_FAILS(eng_op_cat(mismatch, 2, 1, &out), ENG_ERR_SHAPE, "cat: sizes differ outside dim 1: tensor 0 is [3,2,5], tensor 1 is [4,2,5]");
  T_FAILS(eng_op_cat(mismatch, 2, 3, &out), ENG_ERR_INDEX, "cat: dim 3 out of range");
  cr_assert_null(out);
  eng_op_call_t call = {.id = ENG_OP_CAT, .n_in = 2, .in = mismatch};
  call.attrs.i[0] = 7;
  T_FAILS(eng_op_dispatch(&call), ENG_ERR_INDEX, "cat: dim 7 out of range for [3,2,5]");
  eng_tensor_t *all[] = {x, y, z, s};
  release_all(all, sizeof all / sizeof *all);
}

/* out (stack along dim) against the pieces: out[c] = ts[c[dim]][c without dim]. */
static void check_stack(const eng_tensor_t *out, eng_tensor_t *const *ts, int n, int dim) {
  double *ov = t_values(out), *pv[8] = {0};
  for (int k = 0; k < n; k++) pv[k] = t_values(ts[k]);
  int64_t total = eng_tensor_numel(out), c[ENG_MAX_DIMS], rest[ENG_MAX_DIMS];
  for (int64_t f = 0; f < total; f++) {
    t_coords(f, out->shape, out->ndim, c);
    int r = 0;
    for (int d = 0; d < out->ndim; d++)
      if (d != dim) rest[r++] = c[d];
    cr_assert_eq(ov[f], pv[c[dim]][t_flat_index(rest, ts[0]->shape, ts[0]->ndim)], "element %lld", (long long)f);
  }
  free(ov);
  for (int k = 0; k < n; k++) free(pv[k]);
}

Test(stack, all_dtypes_and_dims) {
  int64_t s[2] = {4, 5};
  for (size_t d = 0; d < N_ALL; d++) {
    eng_tensor_t *ts[3] = {rand_data(s, 2, ALL[d], 1), rand_data(s, 2, ALL[d], 2), rand_data(s, 2, ALL[d], 3)};
    for (int dim = -1; dim <= 2; dim++) {
      int nd = dim < 0 ? 2 : dim;
      eng_tensor_t *out = NULL;
      T_OK(eng_op_stack(ts, 3, dim, &out));
      int64_t want[3];
      for (int i = 0, j = 0; i < 3; i++) want[i] = i == nd ? 3 : s[j++];
      assert_shape(out, want, 3);
      cr_assert_eq(out->dtype, ALL[d]);
      check_stack(out, ts, 3, nd);
      eng_tensor_release(out);
    }
    release_all(ts, 3);
  }
}

Test(stack, scalars_views_and_promotion) {
  double v[3] = {1.5, -2.25, 4};
  int64_t none[1] = {0};
  eng_tensor_t *s[3] = {t_tensor(&v[0], none, 0, ENG_F32), t_tensor(&v[1], none, 0, ENG_F64),
                        t_tensor(&v[2], none, 0, ENG_I64)};
  eng_tensor_t *out = NULL;
  T_OK(eng_op_stack(s, 3, 0, &out));
  int64_t want[1] = {3};
  assert_shape(out, want, 1);
  cr_assert_eq(out->dtype, ENG_F64);
  check_stack(out, s, 3, 0);
  eng_tensor_release(out);
  release_all(s, 3);

  int64_t s35[2] = {3, 5};
  eng_tensor_t *a = rand_data(s35, 2, ENG_BF16, 4), *b = rand_data(s35, 2, ENG_BF16, 5), *at, *bt;
  T_OK(eng_tensor_transpose(a, 0, 1, &at));
  T_OK(eng_tensor_transpose(b, 0, 1, &bt));
  eng_tensor_t *ts[2] = {at, bt};
  T_OK(eng_op_stack(ts, 2, 1, &out));
  int64_t want532[3] = {5, 2, 3};
  assert_shape(out, want532, 3);
  check_stack(out, ts, 2, 1);
  eng_tensor_release(out);
  eng_tensor_t *all[] = {a, b, at, bt};
  release_all(all, sizeof all / sizeof *all);
}

Test(stack, errors) {
  int64_t s45[2] = {4, 5}, s54[2] = {5, 4}, ones8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  eng_tensor_t *a = rand_data(s45, 2, ENG_F32, 1), *b = rand_data(s54, 2, ENG_F32, 2), *out = NULL;
  eng_tensor_t *ab[2] = {a, b}, *anull[2] = {a, NULL}, *aa[2] = {a, a};
  T_FAILS(eng_op_stack(ab, 2, 0, &out), ENG_ERR_SHAPE, "stack: shapes differ: tensor 0 is [4,5], tensor 1 is [5,4]");
  T_FAILS(eng_op_stack(ab, 0, 0, &out), ENG_ERR_ARG, "stack: needs at least one tensor");
  T_FAILS(eng_op_stack(anull, 2, 0, &out), ENG_ERR_ARG, "stack: tensor 1 is missing");
  T_FAILS(eng_op_stack(aa, 2, 3, &out), ENG_ERR_INDEX, "stack: dim 3 out of range");
  /* a ninth dim cannot be made */
  eng_tensor_t *e = rand_data(ones8, 8, ENG_F32, 3), *ee[2] = {e, e};
  eng_status_t st = eng_op_stack(ee, 2, 0, &out);
  cr_assert_neq(st, ENG_OK);
  cr_assert(strncmp(eng_last_error(), "stack: ", 7) == 0, "message: %s", eng_last_error());
  cr_assert_null(out);
  eng_tensor_t *all[] = {a, b, e};
  release_all(all, sizeof all / sizeof *all);
}
