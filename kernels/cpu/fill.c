#include "cpu/fill.h"

#include <string.h>

#include "cpu/convert.h"
#include "cpu/nd_iter.h"

/* The value, already in the dtype's encoding. */
typedef struct {
  unsigned char bits[8];
} fill_value;

#define FILL_RUN_FN(name, T)                                                 \
  static void name(void *ctx, int64_t n, char *const *p, const int64_t *s) { \
    T v, *d = (T *)p[0];                                                     \
    memcpy(&v, ((const fill_value *)ctx)->bits, sizeof v);                   \
    for (int64_t i = 0; i < n; i++) d[i * s[0]] = v;                         \
  }

FILL_RUN_FN(fill8, uint8_t)
FILL_RUN_FN(fill16, uint16_t)
FILL_RUN_FN(fill32, uint32_t)
FILL_RUN_FN(fill64, uint64_t)

void eng_kcpu_fill(void *dst, eng_dtype_t dt, const int64_t *stride, const int64_t *shape, int ndim,
                   double value) {
  fill_value val;
  eng_k_store(val.bits, dt, 0, value);
  size_t size = eng_k_size(dt);
  eng_kcpu_nd_t it;
  eng_kcpu_nd_init(&it, ndim, shape, 1);
  eng_kcpu_nd_operand(&it, 0, dst, size, stride);
  eng_kcpu_nd_run(&it, size == 1 ? fill8 : size == 2 ? fill16 : size == 4 ? fill32 : fill64, &val);
}
