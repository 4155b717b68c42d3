/* Helpers of the CUDA op tests (reduce, norm, elementwise, matmul, index): one input on both
 * devices (views made the same way on each side, so the GPU operand really is strided), CUDA runs
 * into poisoned preset outputs, and comparison against the CPU reference. */
#ifndef TEST_CUDA_NUMERIC_H
#define TEST_CUDA_NUMERIC_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_compare.h"
#include "eng_cuda.h"
#include "ops/ops_internal.h"

/* The same tensor on the CPU (c) and on cuda:0 (g). */
typedef struct {
  eng_tensor_t *c, *g;
} pair_t;

/* Takes c (one reference) and copies it to the GPU. */
static inline pair_t pair_of(eng_tensor_t *c) {
  pair_t p = {c, NULL};
  T_OK(eng_tensor_to_device(c, GPU0, &p.g));
  return p;
}

static inline pair_t pair_rand(const int64_t *shape, int nd, eng_dtype_t dt, uint64_t seed,
                               double lo, double hi) {
  return pair_of(t_rand_tensor(shape, nd, dt, seed, lo, hi));
}

/* A tensor of values on both sides. */
static inline pair_t pair_values(const double *v, const int64_t *shape, int nd, eng_dtype_t dt) {
  return pair_of(t_tensor(v, shape, nd, dt));
}

static inline void pair_release(pair_t p) {
  eng_tensor_release(p.c);
  eng_tensor_release(p.g);
}

static inline pair_t pair_transpose(pair_t p, int64_t d0, int64_t d1) {
  pair_t v = {NULL, NULL};
  T_OK(eng_tensor_transpose(p.c, d0, d1, &v.c));
  T_OK(eng_tensor_transpose(p.g, d0, d1, &v.g));
  return v;
}

static inline pair_t pair_narrow(pair_t p, int64_t dim, int64_t start, int64_t len) {
  pair_t v = {NULL, NULL};
  T_OK(eng_tensor_narrow(p.c, dim, start, len, &v.c));
  T_OK(eng_tensor_narrow(p.g, dim, start, len, &v.g));
  return v;
}

static inline pair_t pair_slice(pair_t p, int64_t dim, int64_t start, int64_t stop, int64_t step) {
  pair_t v = {NULL, NULL};
  T_OK(eng_tensor_slice(p.c, dim, start, stop, step, &v.c));
  T_OK(eng_tensor_slice(p.g, dim, start, stop, step, &v.g));
  return v;
}

static inline pair_t pair_expand(pair_t p, const int64_t *shape, int nd) {
  pair_t v = {NULL, NULL};
  T_OK(eng_tensor_expand(p.c, shape, nd, &v.c));
  T_OK(eng_tensor_expand(p.g, shape, nd, &v.g));
  return v;
}

static inline pair_t pair_view(pair_t p, const int64_t *shape, int nd) {
  pair_t v = {NULL, NULL};
  T_OK(eng_tensor_view(p.c, shape, nd, &v.c));
  T_OK(eng_tensor_view(p.g, shape, nd, &v.g));
  return v;
}

/* The same views, consuming the base pair (the view keeps the storage): an operand built in one
 * expression, e.g. transpose_pair(pair_rand(...), 0, 1). */
static inline pair_t pair_consume(pair_t base, pair_t view) {
  pair_release(base);
  return view;
}
static inline pair_t transpose_pair(pair_t p, int64_t d0, int64_t d1) {
  return pair_consume(p, pair_transpose(p, d0, d1));
}
static inline pair_t slice_pair(pair_t p, int64_t dim, int64_t start, int64_t stop, int64_t step) {
  return pair_consume(p, pair_slice(p, dim, start, stop, step));
}
static inline pair_t expand_pair(pair_t p, const int64_t *shape, int nd) {
  return pair_consume(p, pair_expand(p, shape, nd));
}

/* Takes back to the GPU what the test changed in p->c. */
static inline void pair_resync(pair_t *p) {
  eng_tensor_release(p->g);
  p->g = NULL;
  T_OK(eng_tensor_to_device(p->c, GPU0, &p->g));
}

/* Dispatches call (inputs on the GPU) into a preset output shaped like the CPU result `want` and
 * filled with `fill`; returns that output. */
static inline eng_tensor_t *run_into(eng_op_call_t *call, const eng_tensor_t *want, double fill) {
  eng_tensor_t *host = NULL;
  T_OK(eng_tensor_full(want->shape, want->ndim, fill, want->dtype, ENG_CPU_DEVICE, &host));
  call->n_out = 1;
  call->out[0] = NULL;
  T_OK(eng_tensor_to_device(host, GPU0, &call->out[0]));
  eng_tensor_release(host);
  eng_status_t st = eng_op_dispatch(call);
  cr_assert(st == ENG_OK, "%s on cuda failed: %s", eng_op_def(call->id)->name, eng_last_error());
  return call->out[0];
}

static inline int has_nan(const eng_tensor_t *t) {
  if (!eng_dtype_is_float(t->dtype)) return 0;
  double *v = t_values(t);
  int found = 0;
  for (int64_t i = 0; i < eng_tensor_numel(t) && !found; i++) found = isnan(v[i]);
  free(v);
  return found;
}

/* Asserts that got (on the GPU; released here) holds what the CPU reference want holds: the same
 * shape and dtype; integers equal; floats NaN or infinite exactly where want is (and the same
 * infinity), and within the dtype's tolerance elsewhere, as ||got - want|| / ||want||. */
static inline void expect_close(eng_tensor_t *got, eng_tensor_t *want, const char *what) {
  cr_assert(eng_shape_equal(got, want) && got->dtype == want->dtype,
            "%s: shape or dtype differ (got %s, want %s)", what, eng_dtype_name(got->dtype),
            eng_dtype_name(want->dtype));
  const int64_t n = eng_tensor_numel(want);
  eng_tensor_t *host = NULL, *g = NULL, *w = NULL;
  T_OK(eng_tensor_to_device(got, ENG_CPU_DEVICE, &host));
  T_OK(eng_tensor_contiguous(host, &g));
  T_OK(eng_tensor_contiguous(want, &w));
  if (!eng_dtype_is_float(want->dtype)) {
    size_t es = eng_dtype_size(want->dtype);
    const unsigned char *a = eng_tensor_data(g), *b = eng_tensor_data(w);
    for (int64_t i = 0; i < n; i++)
      cr_assert(!memcmp(a + i * es, b + i * es, es), "%s: [%lld] = %.17g, want %.17g", what,
                (long long)i, eng_load_f64(a, want->dtype, i), eng_load_f64(b, want->dtype, i));
  } else {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
      double a = eng_load_f64(eng_tensor_data(g), want->dtype, i);
      double b = eng_load_f64(eng_tensor_data(w), want->dtype, i);
      if (isnan(a) || isnan(b) || isinf(a) || isinf(b)) {
        cr_assert(a == b || (isnan(a) && isnan(b)), "%s: [%lld] = %g, want %g", what,
                  (long long)i, a, b);
        continue;
      }
      num += (a - b) * (a - b);
      den += b * b;
    }
    double err = den > 0 ? sqrt(num / den) : sqrt(num);
    cr_assert(err <= t_tol(want->dtype), "%s [%s, %lld elements]: rel err %g > %g", what,
              eng_dtype_name(want->dtype), (long long)n, err, t_tol(want->dtype));
  }
  eng_tensor_release(w);
  eng_tensor_release(g);
  eng_tensor_release(host);
  eng_tensor_release(got);
}

/* Runs call (inputs on the GPU) and checks its output against the CPU result want (expect_close).
 * The output is first poisoned (NaN for floats), so every element must be written; when want
 * holds NaNs, which that poison would hide, the run is repeated into zeros. */
static inline void expect_call(eng_op_call_t *call, eng_tensor_t *want, const char *what) {
  expect_close(run_into(call, want, poison_of(want->dtype)), want, what);
  if (has_nan(want)) expect_close(run_into(call, want, 0), want, what);
}

#endif
