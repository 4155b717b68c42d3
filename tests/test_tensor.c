/* Tensors: allocation, creation values, refcounts, element access, copies across dtypes and
 * layouts, wrapping caller memory, and the registry's copy/fill/creation error paths. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eng_autograd.h"
#include "eng_registry.h"
#include "support.h"

static const eng_dtype_t ALL[ENG_DTYPE_COUNT] = {ENG_F64, ENG_F32, ENG_F16, ENG_BF16, ENG_I32, ENG_I64, ENG_U8};

/* v as dtype dt would hold it: floats round to nearest (f16/bf16 through the conversions that
 * test_dtype checks bit by bit), integers truncate toward zero and saturate, NaN -> 0. */
static double round_to(eng_dtype_t dt, double v) {
  double lo, hi;
  switch (dt) {
  case ENG_F64: return v;
  case ENG_F32: return (double)(float)v;
  case ENG_F16: return eng_f16_to_f32(eng_f64_to_f16(v));
  case ENG_BF16: return eng_bf16_to_f32(eng_f64_to_bf16(v));
  case ENG_I32: lo = -2147483648.0, hi = 2147483647.0; break;
  case ENG_I64: lo = -0x1p63, hi = 0x1p63; break;
  default: lo = 0, hi = 255; break;
  }
  if (isnan(v)) return 0;
  v = trunc(v);
  return v < lo ? lo : v > hi ? hi : v;
}

/* A CUDA device that does not exist in any build (cuda:0 without a GPU), and what using it says. */
#define MISSING_GPU ((eng_device_t){ENG_DEV_CUDA, eng_cuda_device_count()})
#ifdef ENG_HAVE_CUDA
#define MISSING_GPU_WHY "does not exist"
#else
#define MISSING_GPU_WHY "built without CUDA"
#endif

static double get2(const eng_tensor_t *t, int64_t i, int64_t j) {
  int64_t idx[2] = {i, j};
  double v;
  T_OK(eng_tensor_get(t, idx, &v));
  return v;
}

static int64_t storage_refs(const eng_tensor_t *t) { return t->storage->refcount; }

Test(tensor, empty_layout_and_queries) {
  int64_t shape[2] = {3, 7};
  eng_tensor_t *t;
  T_OK(eng_tensor_empty(shape, 2, ENG_F32, ENG_CPU_DEVICE, &t));
  cr_assert_eq(t->ndim, 2);
  cr_assert(t->shape[0] == 3 && t->shape[1] == 7 && t->stride[0] == 7 && t->stride[1] == 1);
  cr_assert(t->offset == 0 && t->refcount == 1 && eng_tensor_version(t) == 0 && t->autograd == NULL);
  cr_assert_eq(eng_tensor_numel(t), 21);
  cr_assert_eq(eng_tensor_nbytes(t), 84);
  cr_assert(eng_tensor_is_contiguous(t));
  cr_assert_eq(eng_tensor_device(t).type, ENG_DEV_CPU);
  cr_assert_eq((uintptr_t)eng_tensor_data(t) % 64, 0);
  eng_tensor_release(t);

  T_OK(eng_tensor_empty(NULL, 0, ENG_F64, ENG_CPU_DEVICE, &t));
  cr_assert(t->ndim == 0 && eng_tensor_numel(t) == 1 && eng_tensor_nbytes(t) == 8);
  eng_tensor_release(t);

  int64_t zero[2] = {0, 5};
  T_OK(eng_tensor_empty(zero, 2, ENG_I64, ENG_CPU_DEVICE, &t));
  cr_assert(eng_tensor_numel(t) == 0 && eng_tensor_nbytes(t) == 0 && eng_tensor_is_contiguous(t));
  cr_assert_not_null(eng_tensor_data(t));
  eng_tensor_release(t);
  eng_tensor_release(NULL);
}

Test(tensor, bytes_live_follow_storages) {
  size_t before = eng_cpu_bytes_live();
  int64_t shape[1] = {100};
  eng_tensor_t *t, *v;
  T_OK(eng_tensor_empty(shape, 1, ENG_F64, ENG_CPU_DEVICE, &t));
  cr_assert_eq(eng_cpu_bytes_live(), before + 800);
  T_OK(eng_tensor_narrow(t, 0, 10, 5, &v));
  cr_assert_eq(eng_cpu_bytes_live(), before + 800, "a view allocates no data");
  eng_tensor_release(t);
  cr_assert_eq(eng_cpu_bytes_live(), before + 800, "the view keeps the storage");
  eng_tensor_release(v);
  cr_assert_eq(eng_cpu_bytes_live(), before);
}

Test(tensor, contiguity_ignores_size_one_strides) {
  float buf[8] = {0};
  int64_t shape[3] = {2, 1, 4}, odd[3] = {4, 99, 1}, bad[3] = {1, 4, 2};
  eng_tensor_t *t;
  T_OK(eng_tensor_wrap(buf, ENG_F32, shape, 3, odd, ENG_CPU_DEVICE, &t));
  cr_assert(eng_tensor_is_contiguous(t));
  eng_tensor_release(t);
  T_OK(eng_tensor_wrap(buf, ENG_F32, shape, 3, bad, ENG_CPU_DEVICE, &t));
  cr_assert(!eng_tensor_is_contiguous(t));
  eng_tensor_release(t);
}

Test(tensor, zeros_ones_full_every_dtype) {
  const int64_t shapes[4][2] = {{1, 1}, {7, 1}, {3, 33}, {1, 1}};
  const int ndims[4] = {1, 1, 2, 0};
  const double values[] = {2.75, -3.3, 1e6, 0.1};
  for (int d = 0; d < ENG_DTYPE_COUNT; d++) {
    for (int s = 0; s < 4; s++) {
      eng_tensor_t *z, *o, *f;
      T_OK(eng_tensor_zeros(shapes[s], ndims[s], ALL[d], ENG_CPU_DEVICE, &z));
      T_OK(eng_tensor_ones(shapes[s], ndims[s], ALL[d], ENG_CPU_DEVICE, &o));
      int64_t n = eng_tensor_numel(z);
      double *vz = t_values(z), *vo = t_values(o);
      for (int64_t i = 0; i < n; i++) cr_assert(vz[i] == 0 && vo[i] == 1);
      free(vz);
      free(vo);
      for (size_t k = 0; k < sizeof values / sizeof values[0]; k++) {
        T_OK(eng_tensor_full(shapes[s], ndims[s], values[k], ALL[d], ENG_CPU_DEVICE, &f));
        cr_assert_eq(f->dtype, ALL[d]);
        double *vf = t_values(f), want = round_to(ALL[d], values[k]);
        for (int64_t i = 0; i < n; i++)
          cr_assert_eq(vf[i], want, "full(%g) %s: %g", values[k], eng_dtype_name(ALL[d]), vf[i]);
        free(vf);
        eng_tensor_release(f);
      }
      eng_tensor_release(z);
      eng_tensor_release(o);
    }
  }
}

Test(tensor, allocation_errors) {
  int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, neg[2] = {2, -1}, ok[1] = {3};
  eng_tensor_t *t = NULL;
  T_FAILS(eng_tensor_empty(nine, 9, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_SHAPE, "empty: 9 dims requested; at most 8");
  T_FAILS(eng_tensor_empty(neg, 2, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_SHAPE, "empty: negative size in shape [2,-1]");
  T_FAILS(eng_tensor_zeros(neg, 2, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_SHAPE, "zeros: negative size in shape [2,-1]");
  T_FAILS(eng_tensor_full(nine, 9, 1.0, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_SHAPE, "full: 9 dims");
  T_FAILS(eng_tensor_empty(ok, 1, (eng_dtype_t)42, ENG_CPU_DEVICE, &t), ENG_ERR_DTYPE, "invalid dtype 42");
  int64_t huge[3] = {1LL << 40, 1LL << 40, 1LL << 40};
  T_FAILS(eng_tensor_empty(huge, 3, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_SHAPE, "too many elements");
  T_FAILS(eng_tensor_ones(ok, 1, ENG_F32, MISSING_GPU, &t), ENG_ERR_DEVICE, MISSING_GPU_WHY);
  cr_assert_null(t);
}

Test(tensor, arange_values_every_dtype) {
  const struct {
    double start, end, step;
  } cases[] = {{0, 10, 1}, {1.5, -2, -0.5}, {0, 1, 0.1}, {-3, 30, 7}, {5, 6, 2}, {3, 3, 1}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    double a = cases[c].start, b = cases[c].end, s = cases[c].step;
    int64_t n = 0; /* count by walking, independently of the ceil formula */
    while (s > 0 ? a + n * s < b - 1e-9 : a + n * s > b + 1e-9) n++;
    for (int d = 0; d < ENG_DTYPE_COUNT; d++) {
      eng_tensor_t *t;
      T_OK(eng_tensor_arange(a, b, s, ALL[d], ENG_CPU_DEVICE, &t));
      cr_assert(t->ndim == 1 && t->shape[0] == n, "arange(%g,%g,%g): %lld elements, want %lld", a, b, s,
                (long long)t->shape[0], (long long)n);
      double *v = t_values(t);
      for (int64_t i = 0; i < n; i++) {
        double want = round_to(ALL[d], a + (double)i * s);
        cr_assert(fabs(v[i] - want) <= fabs(want) * 1e-15, "arange %s [%lld]: %.17g vs %.17g",
                  eng_dtype_name(ALL[d]), (long long)i, v[i], want);
      }
      free(v);
      eng_tensor_release(t);
    }
  }
}

Test(tensor, arange_errors) {
  eng_tensor_t *t;
  T_FAILS(eng_tensor_arange(0, 5, 0, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "arange: step must be nonzero");
  T_FAILS(eng_tensor_arange(0, 5, -1, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "arange: step -1 moves away from end 5");
  T_FAILS(eng_tensor_arange(5, 0, 1, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "moves away");
  T_FAILS(eng_tensor_arange(0, INFINITY, 1, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "must be finite");
  T_FAILS(eng_tensor_arange(0, NAN, 1, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "must be finite");
  T_FAILS(eng_tensor_arange(0, 1e300, 1e-10, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "too many");
}

Test(tensor, linspace_ends_exactly) {
  const struct {
    double a, b;
    int64_t n;
  } cases[] = {{-1, 2, 7}, {0, 1, 33}, {0.1, 0.7, 3}, {5, -5, 2}, {3.3, 9, 1}, {1, 2, 0}, {1e-3, 7.77, 101}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    for (int d = 0; d < 4; d++) { /* the float dtypes */
      eng_tensor_t *t;
      T_OK(eng_tensor_linspace(cases[c].a, cases[c].b, cases[c].n, ALL[d], ENG_CPU_DEVICE, &t));
      cr_assert_eq(t->shape[0], cases[c].n);
      double *v = t_values(t);
      int64_t n = cases[c].n;
      for (int64_t i = 0; i < n; i++) {
        double exact = n == 1 ? cases[c].a : cases[c].a + (cases[c].b - cases[c].a) * (double)i / (double)(n - 1);
        cr_assert(fabs(v[i] - exact) <= t_tol(ALL[d]) * (fabs(exact) + 1), "%g vs %g", v[i], exact);
      }
      if (n > 0) cr_assert_eq(v[0], round_to(ALL[d], cases[c].a));
      if (n > 1) cr_assert_eq(v[n - 1], round_to(ALL[d], cases[c].b), "the last is exactly end");
      free(v);
      eng_tensor_release(t);
    }
  }
  eng_tensor_t *t;
  T_OK(eng_tensor_linspace(0, 10, 11, ENG_I32, ENG_CPU_DEVICE, &t));
  double *v = t_values(t);
  for (int i = 0; i < 11; i++) cr_assert_eq(v[i], i);
  free(v);
  eng_tensor_release(t);
  T_FAILS(eng_tensor_linspace(0, 1, -1, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "linspace: steps must be >= 0");
  T_FAILS(eng_tensor_linspace(0, INFINITY, 3, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "linspace: start and end must be finite");
}

Test(tensor, eye_every_dtype) {
  const int64_t dims[][2] = {{3, 5}, {4, 2}, {1, 1}, {0, 3}, {33, 33}};
  for (size_t c = 0; c < sizeof dims / sizeof dims[0]; c++)
    for (int d = 0; d < ENG_DTYPE_COUNT; d++) {
      eng_tensor_t *t;
      T_OK(eng_tensor_eye(dims[c][0], dims[c][1], ALL[d], ENG_CPU_DEVICE, &t));
      cr_assert(t->ndim == 2 && t->shape[0] == dims[c][0] && t->shape[1] == dims[c][1]);
      cr_assert_eq(t->dtype, ALL[d]);
      for (int64_t i = 0; i < dims[c][0]; i++)
        for (int64_t j = 0; j < dims[c][1]; j++) cr_assert_eq(get2(t, i, j), i == j ? 1.0 : 0.0);
      eng_tensor_release(t);
    }
  eng_tensor_t *t;
  T_FAILS(eng_tensor_eye(3, -1, ENG_F32, ENG_CPU_DEVICE, &t), ENG_ERR_SHAPE, "eye: negative size in shape [3,-1]");
}

Test(tensor, from_f64_and_to_f64_every_dtype) {
  int64_t shape[2] = {3, 33};
  double v[99];
  t_random(v, 99, 21, -300, 300);
  for (int d = 0; d < ENG_DTYPE_COUNT; d++) {
    eng_tensor_t *t;
    T_OK(eng_tensor_from_f64(v, shape, 2, ALL[d], ENG_CPU_DEVICE, &t));
    cr_assert(t->dtype == ALL[d] && eng_tensor_is_contiguous(t) && eng_tensor_version(t) == 0);
    double *back = t_values(t);
    for (int i = 0; i < 99; i++) cr_assert_eq(back[i], round_to(ALL[d], v[i]), "%s [%d]", eng_dtype_name(ALL[d]), i);
    free(back);
    eng_tensor_release(t);
  }
  eng_tensor_t *t;
  T_FAILS(eng_tensor_from_f64(v, shape, 2, ENG_F32, MISSING_GPU, &t), ENG_ERR_DEVICE, MISSING_GPU_WHY);
}

Test(tensor, views_share_storage_and_refcounts) {
  size_t before = eng_cpu_bytes_live();
  int64_t shape[2] = {4, 6};
  double v[24];
  t_random(v, 24, 8, -1, 1);
  eng_tensor_t *t = t_tensor(v, shape, 2, ENG_F64), *tt;
  T_OK(eng_tensor_transpose(t, 0, 1, &tt));
  cr_assert_eq(tt->storage, t->storage);
  cr_assert_eq(storage_refs(t), 2);
  cr_assert_eq(tt->refcount, 1);
  eng_tensor_retain(tt);
  cr_assert_eq(tt->refcount, 2);
  eng_tensor_release(tt);
  eng_tensor_release(t);
  cr_assert_eq(storage_refs(tt), 1);
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 4; j++) cr_assert_eq(get2(tt, i, j), v[j * 6 + i]);
  eng_tensor_release(tt);
  cr_assert_eq(eng_cpu_bytes_live(), before);
}

Test(tensor, get_set_and_bounds) {
  int64_t shape[2] = {3, 7};
  double v[21];
  t_random(v, 21, 4, -10, 10);
  eng_tensor_t *t = t_tensor(v, shape, 2, ENG_F32), *tt;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 7; j++) cr_assert_eq(get2(t, i, j), (double)(float)v[i * 7 + j]);
  int64_t idx[2] = {2, 6};
  T_OK(eng_tensor_set(t, idx, 5.5));
  cr_assert_eq(get2(t, 2, 6), 5.5);
  cr_assert_eq(eng_tensor_version(t), 1);
  T_OK(eng_tensor_transpose(t, 0, 1, &tt));
  int64_t tidx[2] = {4, 1};
  T_OK(eng_tensor_set(tt, tidx, -1.25));
  cr_assert_eq(get2(t, 1, 4), -1.25, "writes through a view land in the base");
  cr_assert_eq(eng_tensor_version(t), 2, "the version belongs to the storage that views share");
  double out;
  int64_t bad1[2] = {3, 0}, bad2[2] = {0, -1};
  T_FAILS(eng_tensor_get(t, bad1, &out), ENG_ERR_INDEX, "get: index [3,0] out of range for shape [3,7]");
  T_FAILS(eng_tensor_set(t, bad2, 1.0), ENG_ERR_INDEX, "set: index [0,-1] out of range for shape [3,7]");
  cr_assert_eq(eng_tensor_version(t), 2, "a failed set changes nothing");
  eng_tensor_release(tt);
  eng_tensor_release(t);

  eng_tensor_t *s;
  T_OK(eng_tensor_full(NULL, 0, 7.0, ENG_I64, ENG_CPU_DEVICE, &s));
  T_OK(eng_tensor_get(s, idx, &out)); /* a 0-d tensor reads no index entries */
  cr_assert_eq(out, 7.0);
  eng_tensor_release(s);
}

/* A [7,33] source of dtype sdt in one of several layouts, and its logical values (row-major). */
static eng_tensor_t *make_source(int layout, eng_dtype_t sdt, double *logical, uint64_t seed) {
  double raw[7 * 33];
  int64_t s733[2] = {7, 33}, s337[2] = {33, 7}, s133[2] = {1, 33}, s33[1] = {33};
  double lo = sdt == ENG_U8 ? 0 : -120, hi = 120;
  t_random(raw, 7 * 33, seed, lo, hi);
  eng_tensor_t *base, *t;
  switch (layout) {
  case 0: /* contiguous */
    t = t_tensor(raw, s733, 2, sdt);
    for (int i = 0; i < 231; i++) logical[i] = round_to(sdt, raw[i]);
    return t;
  case 1: /* transposed */
    base = t_tensor(raw, s337, 2, sdt);
    T_OK(eng_tensor_transpose(base, 0, 1, &t));
    eng_tensor_release(base);
    for (int i = 0; i < 7; i++)
      for (int j = 0; j < 33; j++) logical[i * 33 + j] = round_to(sdt, raw[j * 7 + i]);
    return t;
  case 2: /* [1,33] broadcast over rows */
    t = t_tensor(raw, s133, 2, sdt);
    for (int i = 0; i < 7; i++)
      for (int j = 0; j < 33; j++) logical[i * 33 + j] = round_to(sdt, raw[j]);
    return t;
  case 3: /* [33]: a missing leading dim */
    t = t_tensor(raw, s33, 1, sdt);
    for (int i = 0; i < 7; i++)
      for (int j = 0; j < 33; j++) logical[i * 33 + j] = round_to(sdt, raw[j]);
    return t;
  default: /* 0-d */
    t = t_tensor(raw, NULL, 0, sdt);
    for (int i = 0; i < 231; i++) logical[i] = round_to(sdt, raw[0]);
    return t;
  }
}

Test(copy, every_dtype_pair_layout_and_broadcast) {
  int64_t wide[2] = {7, 66};
  for (int sd = 0; sd < ENG_DTYPE_COUNT; sd++)
    for (int dd = 0; dd < ENG_DTYPE_COUNT; dd++)
      for (int layout = 0; layout < 5; layout++)
        for (int strided_dst = 0; strided_dst < 2; strided_dst++) {
          double logical[231];
          eng_tensor_t *src = make_source(layout, ALL[sd], logical, 100 + (uint64_t)(sd * 7 + dd)), *dst, *base = NULL;
          if (strided_dst) { /* every other column of a [7,66] tensor */
            T_OK(eng_tensor_full(wide, 2, 99.0, ALL[dd], ENG_CPU_DEVICE, &base));
            T_OK(eng_tensor_slice(base, 1, 1, 66, 2, &dst));
          } else {
            int64_t shape[2] = {7, 33};
            T_OK(eng_tensor_empty(shape, 2, ALL[dd], ENG_CPU_DEVICE, &dst));
          }
          uint32_t ver = eng_tensor_version(dst);
          T_OK(eng_tensor_copy_(dst, src));
          cr_assert_eq(eng_tensor_version(dst), ver + 1);
          for (int i = 0; i < 7; i++)
            for (int j = 0; j < 33; j++) {
              double want = round_to(ALL[dd], logical[i * 33 + j]);
              cr_assert_eq(get2(dst, i, j), want, "%s -> %s layout %d strided %d at (%d,%d): %g vs %g",
                           eng_dtype_name(ALL[sd]), eng_dtype_name(ALL[dd]), layout, strided_dst, i, j,
                           get2(dst, i, j), want);
              if (base) cr_assert_eq(get2(base, i, 2 * j), 99.0, "untouched column");
            }
          eng_tensor_release(src);
          eng_tensor_release(dst);
          eng_tensor_release(base);
        }
}

Test(copy, errors) {
  int64_t a[2] = {3, 4}, b[2] = {4, 3}, c[2] = {2, 33}, d[2] = {7, 33}, one[2] = {1, 4};
  eng_tensor_t *x = t_rand_tensor(a, 2, ENG_F32, 1, -1, 1), *y = t_rand_tensor(b, 2, ENG_F32, 2, -1, 1);
  eng_tensor_t *p = t_rand_tensor(c, 2, ENG_F32, 3, -1, 1), *q = t_rand_tensor(d, 2, ENG_F32, 4, -1, 1);
  T_FAILS(eng_tensor_copy_(y, x), ENG_ERR_SHAPE, "copy: a [3,4] source does not fit a [4,3] destination");
  T_FAILS(eng_tensor_copy_(q, p), ENG_ERR_SHAPE, "[2,33] source does not fit a [7,33]");
  T_FAILS(eng_tensor_copy_(p, q), ENG_ERR_SHAPE, "[7,33] source does not fit a [2,33]");
  cr_assert_eq(eng_tensor_version(y), 0);
  eng_tensor_t *small = t_rand_tensor(one, 2, ENG_F32, 5, -1, 1), *expanded;
  T_OK(eng_tensor_expand(small, a, 2, &expanded));
  T_FAILS(eng_tensor_copy_(expanded, x), ENG_ERR_LAYOUT, "copy: the [3,4] destination has elements sharing memory");
  eng_tensor_release(expanded);
  eng_tensor_release(small);
  eng_tensor_release(x);
  eng_tensor_release(y);
  eng_tensor_release(p);
  eng_tensor_release(q);
}

Test(copy, overlapping_source_and_destination) {
  int64_t sq[2] = {5, 5}, line[1] = {10};
  double v[25];
  t_random(v, 25, 77, -5, 5);
  eng_tensor_t *t = t_tensor(v, sq, 2, ENG_F64), *tt;
  T_OK(eng_tensor_transpose(t, 0, 1, &tt));
  T_OK(eng_tensor_copy_(t, tt)); /* in-place transpose: must read before writing */
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 5; j++) cr_assert_eq(get2(t, i, j), v[j * 5 + i]);
  eng_tensor_release(tt);
  eng_tensor_release(t);

  t = t_tensor(v, line, 1, ENG_I64);
  eng_tensor_t *hi, *lo;
  T_OK(eng_tensor_narrow(t, 0, 1, 9, &hi));
  T_OK(eng_tensor_narrow(t, 0, 0, 9, &lo));
  T_OK(eng_tensor_copy_(hi, lo)); /* shift right by one, like memmove */
  double *r = t_values(t);
  cr_assert_eq(r[0], round_to(ENG_I64, v[0]));
  for (int k = 1; k < 10; k++) cr_assert_eq(r[k], round_to(ENG_I64, v[k - 1]));
  free(r);
  T_OK(eng_tensor_copy_(t, t)); /* onto itself: unchanged */
  r = t_values(t);
  for (int k = 1; k < 10; k++) cr_assert_eq(r[k], round_to(ENG_I64, v[k - 1]));
  free(r);
  eng_tensor_release(hi);
  eng_tensor_release(lo);
  eng_tensor_release(t);
}

Test(copy, contiguous_clone_to_dtype) {
  int64_t shape[2] = {5, 7};
  double v[35];
  t_random(v, 35, 9, -50, 50);
  eng_tensor_t *t = t_tensor(v, shape, 2, ENG_F32), *tt, *c, *same, *cl, *ints;
  T_OK(eng_tensor_transpose(t, 0, 1, &tt));
  cr_assert(!eng_tensor_is_contiguous(tt));
  T_OK(eng_tensor_contiguous(tt, &c));
  cr_assert(eng_tensor_is_contiguous(c) && c->storage != t->storage);
  cr_assert(c->shape[0] == 7 && c->shape[1] == 5 && c->stride[0] == 5 && c->stride[1] == 1);
  for (int i = 0; i < 7; i++)
    for (int j = 0; j < 5; j++) cr_assert_eq(get2(c, i, j), (double)(float)v[j * 7 + i]);
  T_OK(eng_tensor_contiguous(t, &same));
  cr_assert_eq(same, t);
  cr_assert_eq(t->refcount, 2);
  eng_tensor_release(same);

  T_OK(eng_tensor_clone(t, &cl));
  cr_assert(cl != t && cl->storage != t->storage);
  T_OK(eng_tensor_fill_(cl, 3.0));
  cr_assert_eq(get2(t, 0, 0), (double)(float)v[0], "the clone is independent");

  T_OK(eng_tensor_to_dtype(t, ENG_F32, &same));
  cr_assert_eq(same, t);
  eng_tensor_release(same);
  T_OK(eng_tensor_to_dtype(tt, ENG_I32, &ints));
  cr_assert(ints->dtype == ENG_I32 && eng_tensor_is_contiguous(ints));
  for (int i = 0; i < 7; i++)
    for (int j = 0; j < 5; j++) cr_assert_eq(get2(ints, i, j), trunc((double)(float)v[j * 7 + i]));
  T_FAILS(eng_tensor_to_dtype(t, (eng_dtype_t)-1, &same), ENG_ERR_DTYPE, "copy: invalid dtype -1");

  T_OK(eng_tensor_to_device(t, ENG_CPU_DEVICE, &same));
  cr_assert_eq(same, t);
  eng_tensor_release(same);
  T_FAILS(eng_tensor_to_device(t, MISSING_GPU, &same), ENG_ERR_DEVICE, MISSING_GPU_WHY);
  eng_tensor_release(ints);
  eng_tensor_release(cl);
  eng_tensor_release(c);
  eng_tensor_release(tt);
  eng_tensor_release(t);
}

Test(copy, large_tensors_use_the_threaded_paths) {
  int64_t shape[2] = {301, 303}, flat[1] = {1 << 20};
  double *v = malloc(sizeof(double) * 301 * 303);
  t_random(v, 301 * 303, 12, -1, 1);
  eng_tensor_t *t = t_tensor(v, shape, 2, ENG_F32), *tt, *d;
  T_OK(eng_tensor_transpose(t, 0, 1, &tt));
  T_OK(eng_tensor_to_dtype(tt, ENG_F64, &d));
  double *r = t_values(d);
  for (int i = 0; i < 303; i++)
    for (int j = 0; j < 301; j++) cr_assert_eq(r[i * 301 + j], (double)(float)v[j * 303 + i]);
  free(r);
  eng_tensor_release(d);
  eng_tensor_release(tt);
  eng_tensor_release(t);
  free(v);

  v = malloc(sizeof(double) << 20);
  t_random(v, 1 << 20, 13, -1, 1);
  t = t_tensor(v, flat, 1, ENG_BF16);
  T_OK(eng_tensor_clone(t, &d));
  cr_assert_eq(memcmp(eng_tensor_data(t), eng_tensor_data(d), 2u << 20), 0);
  eng_tensor_release(d);
  eng_tensor_release(t);
  free(v);
}

Test(tensor, wrap_without_copy) {
  size_t before = eng_cpu_bytes_live();
  float buf[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3}, colmajor[2] = {1, 2}, neg[2] = {3, -1};
  eng_tensor_t *t, *cm;
  T_OK(eng_tensor_wrap(buf, ENG_F32, shape, 2, NULL, ENG_CPU_DEVICE, &t));
  cr_assert_eq(eng_tensor_data(t), (void *)buf);
  cr_assert_null(t->storage->free_fn);
  cr_assert_eq(eng_cpu_bytes_live(), before);
  cr_assert_eq(t->storage->nbytes, sizeof buf);
  int64_t idx[2] = {1, 2};
  T_OK(eng_tensor_set(t, idx, 60));
  cr_assert_eq(buf[5], 60.0f);
  buf[0] = -7;
  cr_assert_eq(get2(t, 0, 0), -7.0);
  T_OK(eng_tensor_wrap(buf, ENG_F32, shape, 2, colmajor, ENG_CPU_DEVICE, &cm));
  cr_assert(!eng_tensor_is_contiguous(cm));
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) cr_assert_eq(get2(cm, i, j), (double)buf[j * 2 + i]);
  eng_tensor_release(cm);
  eng_tensor_release(t);
  cr_assert_eq(buf[1], 2.0f, "the buffer outlives its tensors untouched");

  T_FAILS(eng_tensor_wrap(buf, ENG_F32, shape, 2, neg, ENG_CPU_DEVICE, &t), ENG_ERR_LAYOUT, "wrap: negative stride in [3,-1]");
  T_FAILS(eng_tensor_wrap(NULL, ENG_F32, shape, 2, NULL, ENG_CPU_DEVICE, &t), ENG_ERR_ARG, "wrap: NULL data for a [2,3] tensor");
  int64_t empty[2] = {0, 3};
  T_OK(eng_tensor_wrap(NULL, ENG_F32, empty, 2, NULL, ENG_CPU_DEVICE, &t));
  cr_assert_eq(eng_tensor_numel(t), 0);
  eng_tensor_release(t);
}

Test(tensor, fill_strided_views_every_dtype) {
  int64_t shape[2] = {6, 8};
  double v[48];
  t_random(v, 48, 31, -9, 9);
  for (int d = 0; d < ENG_DTYPE_COUNT; d++) {
    eng_tensor_t *t = t_tensor(v, shape, 2, ALL[d]), *cols;
    T_OK(eng_tensor_slice(t, 1, 1, 8, 2, &cols));
    T_OK(eng_tensor_fill_(cols, 3.7));
    cr_assert_eq(eng_tensor_version(cols), 1);
    for (int i = 0; i < 6; i++)
      for (int j = 0; j < 8; j++)
        cr_assert_eq(get2(t, i, j), j % 2 ? round_to(ALL[d], 3.7) : round_to(ALL[d], v[i * 8 + j]));
    eng_tensor_release(cols);
    eng_tensor_release(t);
  }
  int64_t one[1] = {1}, four[2] = {3, 4};
  eng_tensor_t *s = t_rand_tensor(one, 1, ENG_F32, 2, -1, 1), *e;
  T_OK(eng_tensor_expand(s, four, 2, &e));
  T_OK(eng_tensor_fill_(e, -2.0)); /* every element is the one stored value */
  cr_assert_eq(get2(e, 2, 3), -2.0);
  eng_tensor_release(e);
  eng_tensor_release(s);
}

Test(tensor, shape_strings_and_dims) {
  char buf[64], tiny[4];
  int64_t s[3] = {4, 3, 12};
  cr_assert_str_eq(eng_shape_str(s, 2, buf, sizeof buf), "[4,3]");
  cr_assert_str_eq(eng_shape_str(s, 0, buf, sizeof buf), "[]");
  cr_assert_str_eq(eng_shape_str(s, 3, buf, sizeof buf), "[4,3,12]");
  eng_shape_str(s, 3, tiny, sizeof tiny);
  cr_assert(strlen(tiny) < 4 && strncmp(tiny, "[4", 2) == 0);
  int d;
  T_OK(eng_dim_wrap("sum", -1, 2, &d));
  cr_assert_eq(d, 1);
  T_OK(eng_dim_wrap("sum", -2, 2, &d));
  cr_assert_eq(d, 0);
  T_FAILS(eng_dim_wrap("sum", 3, 2, &d), ENG_ERR_INDEX, "sum: dim 3 out of range for a 2-d tensor");
  T_FAILS(eng_dim_wrap("sum", -3, 2, &d), ENG_ERR_INDEX, "sum: dim -3 out of range for a 2-d tensor");
  T_FAILS(eng_dim_wrap("max", 0, 0, &d), ENG_ERR_INDEX, "max: dim 0 out of range for a 0-d tensor");

  eng_tensor_t *a, *b, *c;
  int64_t x[2] = {2, 3}, y[2] = {3, 2};
  T_OK(eng_tensor_empty(x, 2, ENG_F32, ENG_CPU_DEVICE, &a));
  T_OK(eng_tensor_empty(x, 2, ENG_I64, ENG_CPU_DEVICE, &b));
  T_OK(eng_tensor_empty(y, 2, ENG_F32, ENG_CPU_DEVICE, &c));
  cr_assert(eng_shape_equal(a, b) && !eng_shape_equal(a, c));
  eng_tensor_release(a);
  eng_tensor_release(b);
  eng_tensor_release(c);
}

Test(registry_ops, copy_fill_create_error_paths) {
  eng_op_call_t fill = {.id = ENG_OP_FILL, .n_out = 1};
  T_FAILS(eng_op_dispatch(&fill), ENG_ERR_INTERNAL, "fill: no tensor to fill");

  int64_t three[1] = {3};
  eng_tensor_t *wrong;
  T_OK(eng_tensor_empty(three, 1, ENG_F32, ENG_CPU_DEVICE, &wrong));
  eng_op_call_t ar = {.id = ENG_OP_ARANGE, .n_out = 1, .out = {wrong}};
  ar.attrs.i[0] = 4;
  ar.attrs.ni = 1;
  ar.attrs.f[1] = 1;
  ar.attrs.dtype = ENG_F32;
  T_FAILS(eng_op_dispatch(&ar), ENG_ERR_SHAPE, "arange: the output must be a contiguous f32 [4], got a f32 [3]");
  ar.attrs.i[0] = 3; /* now it fits: the op writes into it */
  ar.attrs.f[0] = 10;
  T_OK(eng_op_dispatch(&ar));
  double *r = t_values(wrong);
  cr_assert(r[0] == 10 && r[1] == 11 && r[2] == 12);
  free(r);
  ar.attrs.dtype = (eng_dtype_t)9;
  ar.out[0] = NULL;
  T_FAILS(eng_op_dispatch(&ar), ENG_ERR_DTYPE, "arange: invalid dtype 9");
  eng_tensor_release(wrong);

  eng_op_call_t eye = {.id = ENG_OP_EYE, .n_out = 1};
  eye.attrs.i[0] = 3;
  eye.attrs.ni = 1;
  T_FAILS(eng_op_dispatch(&eye), ENG_ERR_INTERNAL, "eye: expects a 2-d shape");
  eng_op_call_t ar2 = {.id = ENG_OP_ARANGE, .n_out = 1};
  ar2.attrs.ni = 2;
  T_FAILS(eng_op_dispatch(&ar2), ENG_ERR_INTERNAL, "arange: expects a 1-d shape");
  eng_op_call_t big = {.id = ENG_OP_EYE, .n_out = 1};
  big.attrs.ni = 9;
  T_FAILS(eng_op_dispatch(&big), ENG_ERR_SHAPE, "eye: 9 dims requested");

  eng_op_call_t cp = {.id = ENG_OP_COPY, .n_in = 1, .in = (eng_tensor_t *const[]){NULL}, .n_out = 1};
  T_FAILS(eng_op_dispatch(&cp), ENG_ERR_ARG, "copy: no source tensor");
}

/* Element access and transfers on a non-CPU tensor are routed through the registry's copy/fill,
 * whose dispatch says when the GPU is missing (a wrapped buffer stands in for device memory;
 * nothing dereferences it). With a GPU, the CUDA tests cover these paths. */
Test(tensor, non_cpu_access_goes_through_the_registry) {
  if (eng_cuda_device_count() > 0) cr_skip_test("a GPU is present");
  float dummy[4] = {0};
  int64_t shape[1] = {4}, i[1] = {1};
  eng_tensor_t *t, *h = NULL;
  double v, out[4];
  T_OK(eng_tensor_wrap(dummy, ENG_F32, shape, 1, NULL, MISSING_GPU, &t));
  cr_assert_eq(eng_tensor_device(t).type, ENG_DEV_CUDA);
  T_FAILS(eng_tensor_get(t, i, &v), ENG_ERR_DEVICE, MISSING_GPU_WHY);
  T_FAILS(eng_tensor_set(t, i, 1.0), ENG_ERR_DEVICE, MISSING_GPU_WHY);
  T_FAILS(eng_tensor_to_f64(t, out), ENG_ERR_DEVICE, MISSING_GPU_WHY);
  T_FAILS(eng_tensor_to_device(t, ENG_CPU_DEVICE, &h), ENG_ERR_DEVICE, "copy: cuda: ");
  T_FAILS(eng_tensor_fill_(t, 2.0), ENG_ERR_DEVICE, "fill: cuda: ");
  T_FAILS(eng_tensor_clone(t, &h), ENG_ERR_DEVICE, MISSING_GPU_WHY);
  cr_assert_null(h);
  cr_assert_eq(eng_tensor_version(t), 0);
  cr_assert_eq(dummy[1], 0.0f);
  eng_tensor_release(t);
}
