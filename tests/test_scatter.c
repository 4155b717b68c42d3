/* index_add and scatter_add against loops written here: repeated indices, dims 0, 1 and last,
 * every accumulating dtype, non-contiguous inputs, bf16 sums kept in f32, and every error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* Random integers in [0, limit) as doubles. */
static double *rand_ints(int64_t n, int64_t limit, uint64_t seed) {
  double *v = malloc(sizeof(double) * (size_t)(n + 1));
  t_random(v, n, seed, 0, (double)limit);
  for (int64_t i = 0; i < n; i++) v[i] = floor(v[i]);
  return v;
}

static eng_tensor_t *rand_data(const int64_t *shape, int nd, eng_dtype_t dt, uint64_t seed) {
  return eng_dtype_is_float(dt) ? t_rand_tensor(shape, nd, dt, seed, -1, 1)
                                : t_rand_tensor(shape, nd, dt, seed, -50, 50);
}

/* The reference of index_add: ref = base, ref[.., idx[i], ..] += src[.., i, ..] (in double). */
static double *ref_index_add(const eng_tensor_t *base, int dim, const double *idx,
                             const eng_tensor_t *src) {
  double *ref = t_values(base), *s = t_values(src);
  int64_t c[ENG_MAX_DIMS];
  for (int64_t f = 0; f < eng_tensor_numel(src); f++) {
    t_coords(f, src->shape, src->ndim, c);
    c[dim] = (int64_t)idx[c[dim]];
    ref[t_flat_index(c, base->shape, base->ndim)] += s[f];
  }
  free(s);
  return ref;
}

/* The reference of scatter_add: ref[.. idx[c] ..] += src[c] over index's positions. */
static double *ref_scatter_add(const eng_tensor_t *base, int dim, const double *idx,
                               const int64_t *ishape, const eng_tensor_t *src) {
  double *ref = t_values(base), *s = t_values(src);
  int64_t c[ENG_MAX_DIMS];
  int nd = base->ndim;
  for (int64_t f = 0; f < t_numel(ishape, nd); f++) {
    t_coords(f, ishape, nd, c);
    double v = s[t_flat_index(c, src->shape, nd)];
    c[dim] = (int64_t)idx[f];
    ref[t_flat_index(c, base->shape, nd)] += v;
  }
  free(s);
  return ref;
}

static void release_all(eng_tensor_t **ts, size_t n) {
  for (size_t i = 0; i < n; i++) eng_tensor_release(ts[i]);
}

/* out against the reference values ref (which it frees). */
static void check_close(const eng_tensor_t *out, double *ref, eng_dtype_t dt, const char *what) {
  double err = t_rel_err(out, ref, eng_tensor_numel(out));
  free(ref);
  double tol = eng_dtype_is_float(dt) ? t_tol(dt) : 0;
  cr_assert(err <= tol, "%s %s: rel err %g > %g", what, eng_dtype_name(dt), err, tol);
}

static const eng_dtype_t DTYPES[] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16, ENG_I32, ENG_I64};
#define N_DTYPES (sizeof DTYPES / sizeof *DTYPES)

Test(index_add, repeated_indices_every_dtype_and_dim) {
  int64_t bshape[3] = {5, 6, 4};
  for (size_t k = 0; k < N_DTYPES; k++)
    for (int dim = 0; dim < 3; dim++) {
      eng_dtype_t dt = DTYPES[k];
      int64_t n = 9; /* more entries than the dim: repeats for sure */
      int64_t sshape[3] = {5, 6, 4};
      sshape[dim] = n;
      double *iv = rand_ints(n, bshape[dim], 100 + (uint64_t)dim);
      eng_tensor_t *base = rand_data(bshape, 3, dt, 1 + k), *src = rand_data(sshape, 3, dt, 11 + k);
      eng_tensor_t *idx = t_tensor(iv, &n, 1, k % 2 ? ENG_I32 : ENG_I64), *out = NULL;
      T_OK(eng_op_index_add(base, dim - 3, idx, src, &out)); /* a negative dim */
      cr_assert(out->dtype == dt && eng_shape_equal(out, base));
      check_close(out, ref_index_add(base, dim, iv, src), dt, "index_add");
      free(iv);
      release_all((eng_tensor_t *[]){base, src, idx, out}, 4);
    }
}

/* The backward of embedding: base [V, D], many ids into few rows, src [N, D]. */
Test(index_add, embedding_backward_shape) {
  int64_t V = 7, D = 33, n = 500, bshape[2] = {V, D}, sshape[2] = {n, D};
  double *iv = rand_ints(n, V, 5);
  eng_tensor_t *base = t_rand_tensor(bshape, 2, ENG_F32, 6, -1, 1);
  eng_tensor_t *src = t_rand_tensor(sshape, 2, ENG_F32, 7, -1, 1);
  eng_tensor_t *idx = t_tensor(iv, &n, 1, ENG_I64), *out = NULL;
  T_OK(eng_op_index_add(base, 0, idx, src, &out));
  check_close(out, ref_index_add(base, 0, iv, src), ENG_F32, "index_add [7,33] <- [500,33]");
  free(iv);
  release_all((eng_tensor_t *[]){base, src, idx, out}, 4);
}

Test(index_add, non_contiguous_inputs) {
  /* base: a transpose; src: a narrowed view; index: every other element of a u8 tensor */
  int64_t bt[2] = {6, 4}, sb[2] = {4, 9}, ib = 11;
  double *iv_all = rand_ints(ib, 6, 9);
  eng_tensor_t *bbase = t_rand_tensor(bt, 2, ENG_F64, 1, -1, 1), *base = NULL;
  eng_tensor_t *sbase = t_rand_tensor(sb, 2, ENG_F64, 2, -1, 1), *src = NULL;
  eng_tensor_t *ibase = t_tensor(iv_all, &ib, 1, ENG_U8), *idx = NULL, *out = NULL;
  T_OK(eng_tensor_transpose(bbase, 0, 1, &base));      /* [4, 6] */
  T_OK(eng_tensor_narrow(sbase, 1, 2, 6, &src));        /* [4, 6], row stride 9 */
  T_OK(eng_tensor_slice(ibase, 0, 0, 11, 2, &idx));     /* 6 entries */
  double iv[6];
  for (int i = 0; i < 6; i++) iv[i] = iv_all[2 * i];
  T_OK(eng_op_index_add(base, 1, idx, src, &out));
  cr_assert(eng_tensor_is_contiguous(out));
  check_close(out, ref_index_add(base, 1, iv, src), ENG_F64, "index_add, strided");
  free(iv_all);
  release_all((eng_tensor_t *[]){bbase, base, sbase, src, ibase, idx, out}, 7);
}

/* bf16 sums are kept in f32 and rounded once: 256 + 16 ones is 272, where adding in bf16 would
 * round every 257 back to 256. */
Test(index_add, bf16_accumulates_in_f32) {
  int64_t one = 1, n = 16, sshape[1] = {16};
  double b = 256, ones[16], zeros[16] = {0};
  for (int i = 0; i < 16; i++) ones[i] = 1;
  eng_tensor_t *base = t_tensor(&b, &one, 1, ENG_BF16), *src = t_tensor(ones, sshape, 1, ENG_BF16);
  eng_tensor_t *idx = t_tensor(zeros, &n, 1, ENG_I64), *out = NULL;
  T_OK(eng_op_index_add(base, 0, idx, src, &out));
  double got;
  T_OK(eng_tensor_to_f64(out, &got));
  cr_assert_eq(got, 272.0, "bf16 256 + 16 x 1 = %g, want 272", got);
  release_all((eng_tensor_t *[]){base, src, idx, out}, 4);
}

Test(scatter_add, dims_0_1_and_last_with_smaller_index) {
  int64_t bshape[3] = {4, 5, 6};
  for (size_t k = 0; k < N_DTYPES; k++)
    for (int dim = 0; dim < 3; dim++) {
      eng_dtype_t dt = DTYPES[k];
      int64_t ishape[3] = {3, 4, 5}, sshape[3] = {3, 5, 6};
      ishape[dim] = 7; /* longer than base along dim: repeats */
      sshape[dim] = 8;
      int64_t ni = t_numel(ishape, 3);
      double *iv = rand_ints(ni, bshape[dim], 200 + (uint64_t)dim);
      eng_tensor_t *base = rand_data(bshape, 3, dt, 21 + k), *src = rand_data(sshape, 3, dt, 31 + k);
      eng_tensor_t *idx = t_tensor(iv, ishape, 3, k % 2 ? ENG_I64 : ENG_I32), *out = NULL;
      T_OK(eng_op_scatter_add(base, dim, idx, src, &out));
      cr_assert(out->dtype == dt && eng_shape_equal(out, base));
      check_close(out, ref_scatter_add(base, dim, iv, ishape, src), dt, "scatter_add");
      free(iv);
      release_all((eng_tensor_t *[]){base, src, idx, out}, 4);
    }
}

Test(scatter_add, transposed_src_and_index) {
  int64_t bshape[2] = {5, 4}, tshape[2] = {4, 6}, ishape[2] = {6, 4};
  double *iv_t = rand_ints(24, 5, 3); /* the index's values, [4, 6] row-major before transposing */
  eng_tensor_t *base = t_rand_tensor(bshape, 2, ENG_F32, 3, -1, 1);
  eng_tensor_t *sbase = t_rand_tensor(tshape, 2, ENG_F32, 4, -1, 1), *src = NULL;
  eng_tensor_t *ibase = t_tensor(iv_t, tshape, 2, ENG_I64), *idx = NULL, *out = NULL;
  T_OK(eng_tensor_transpose(sbase, 0, 1, &src)); /* [6, 4] */
  T_OK(eng_tensor_transpose(ibase, 0, 1, &idx)); /* [6, 4] */
  double iv[24];
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 4; j++) iv[i * 4 + j] = iv_t[j * 6 + i];
  T_OK(eng_op_scatter_add(base, 0, idx, src, &out));
  check_close(out, ref_scatter_add(base, 0, iv, ishape, src), ENG_F32, "scatter_add, transposed");
  free(iv_t);
  release_all((eng_tensor_t *[]){base, sbase, src, ibase, idx, out}, 6);
}

Test(scatter, errors) {
  int64_t b2[2] = {3, 4}, s2[2] = {2, 4}, bad2[2] = {2, 5}, two = 2, i2[2] = {2, 4};
  double iv[2] = {0, 3}, ok[8] = {0, 1, 2, 0, 1, 2, 0, 1}, bad8[8] = {0, 1, 4, 0, 1, 2, 0, 1};
  eng_tensor_t *base = t_rand_tensor(b2, 2, ENG_F32, 1, -1, 1), *src = t_rand_tensor(s2, 2, ENG_F32, 2, -1, 1);
  eng_tensor_t *bad_src = t_rand_tensor(bad2, 2, ENG_F32, 3, -1, 1);
  eng_tensor_t *idx_bad = t_tensor(iv, &two, 1, ENG_I64), *idx_ok = t_tensor(ok, &two, 1, ENG_I64);
  eng_tensor_t *idx2 = t_tensor(ok, i2, 2, ENG_I64), *idx2_bad = t_tensor(bad8, i2, 2, ENG_I64), *out = NULL;
  eng_tensor_t *src64 = t_rand_tensor(s2, 2, ENG_F64, 4, -1, 1), *fidx = t_tensor(iv, &two, 1, ENG_F32);
  eng_tensor_t *u8 = t_rand_tensor(b2, 2, ENG_U8, 5, 0, 9), *u8s = t_rand_tensor(s2, 2, ENG_U8, 6, 0, 9);
  T_FAILS(eng_op_index_add(base, 0, idx_bad, src, &out), ENG_ERR_INDEX,
          "index_add: index 3 out of range for dim 0 of size 3");
  T_FAILS(eng_op_index_add(base, 0, idx_ok, bad_src, &out), ENG_ERR_SHAPE, "index_add: src [2,5]");
  T_FAILS(eng_op_index_add(base, 0, idx2, src, &out), ENG_ERR_SHAPE, "must be 1-D");
  T_FAILS(eng_op_index_add(base, 0, idx_ok, src64, &out), ENG_ERR_DTYPE, "base's dtype");
  T_FAILS(eng_op_index_add(base, 0, fidx, src, &out), ENG_ERR_DTYPE, "integer tensor");
  T_FAILS(eng_op_index_add(base, 2, idx_ok, src, &out), ENG_ERR_INDEX, "dim");
  T_FAILS(eng_op_index_add(u8, 0, idx_ok, u8s, &out), ENG_ERR_DTYPE, "got u8");
  T_FAILS(eng_op_scatter_add(base, 0, idx_ok, src, &out), ENG_ERR_SHAPE, "same number of dims");
  T_FAILS(eng_op_scatter_add(base, 1, idx2_bad, src, &out), ENG_ERR_INDEX,
          "scatter_add: index 4 out of range for dim 1 of size 4");
  cr_assert(out == NULL);
  release_all((eng_tensor_t *[]){base, src, bad_src, idx_bad, idx_ok, idx2, idx2_bad, src64, fidx, u8, u8s}, 11);
}
