/* Helpers of the CUDA data-movement tests (test_cuda_copy.c, test_cuda_random.c): skipping without
 * a GPU, NaN-poisoned destinations, and bit-for-bit comparison against the CPU reference. */
#ifndef TEST_CUDA_COMPARE_H
#define TEST_CUDA_COMPARE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define GPU0 ((eng_device_t){ENG_DEV_CUDA, 0})

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    if (eng_cuda_device_count() == 0) cr_skip_test("no CUDA device");          \
  } while (0)

/* What a destination holds before a kernel writes it: NaN, or an integer no case produces there. */
static inline double poison_of(eng_dtype_t dt) {
  return eng_dtype_is_float(dt) ? NAN : dt == ENG_U8 ? 165 : -77;
}

/* A tensor of poison on dev, made on the CPU and moved over by the plainest path (a dense
 * same-dtype transfer), so that it does not rely on the kernels under test. */
static inline eng_tensor_t *poisoned(const int64_t *shape, int ndim, eng_dtype_t dt, eng_device_t dev) {
  eng_tensor_t *host = NULL, *t = NULL;
  T_OK(eng_tensor_full(shape, ndim, poison_of(dt), dt, ENG_CPU_DEVICE, &host));
  T_OK(eng_tensor_to_device(host, dev, &t));
  eng_tensor_release(host);
  return t;
}

static inline int is_nan_bits(const unsigned char *p, eng_dtype_t dt) {
  double v = eng_load_f64(p, dt, 0);
  return eng_dtype_is_float(dt) && v != v;
}

/* Asserts that got (any device, any layout) holds the same bits as want (CPU), element by
 * element. A mismatch says where, both bit patterns, and how many mismatches were NaNs that differ
 * only in payload bits. */
static inline void expect_same_bits(eng_tensor_t *got, eng_tensor_t *want, const char *what) {
  cr_assert(eng_shape_equal(got, want) && got->dtype == want->dtype, "%s: shape or dtype differ",
            what);
  eng_tensor_t *host = NULL, *g = NULL, *w = NULL;
  T_OK(eng_tensor_to_device(got, ENG_CPU_DEVICE, &host));
  T_OK(eng_tensor_contiguous(host, &g));
  T_OK(eng_tensor_contiguous(want, &w));
  size_t size = eng_dtype_size(want->dtype);
  int64_t n = eng_tensor_numel(want), bad = 0, payload_only = 0, first = -1;
  const unsigned char *a = eng_tensor_data(g), *b = eng_tensor_data(w);
  for (int64_t i = 0; i < n; i++) {
    if (!memcmp(a + i * size, b + i * size, size)) continue;
    if (first < 0) first = i;
    bad++;
    payload_only += is_nan_bits(a + i * size, want->dtype) && is_nan_bits(b + i * size, want->dtype) &&
                    (a[i * size + size - 1] & 0x80) == (b[i * size + size - 1] & 0x80);
  }
  if (bad) {
    uint64_t ga = 0, wb = 0;
    memcpy(&ga, a + first * size, size);
    memcpy(&wb, b + first * size, size);
    cr_assert_fail("%s (%s, %lld elements): %lld differ (%lld of them NaNs differing only in payload); "
                   "first at %lld: got %.17g (0x%llx), want %.17g (0x%llx)",
                   what, eng_dtype_name(want->dtype), (long long)n, (long long)bad,
                   (long long)payload_only, (long long)first, eng_load_f64(a, want->dtype, first),
                   (unsigned long long)ga, eng_load_f64(b, want->dtype, first), (unsigned long long)wb);
  }
  eng_tensor_release(w);
  eng_tensor_release(g);
  eng_tensor_release(host);
}

#endif
