/* Gathers as raw element moves. Work is split by rows (all dims but the last),
 * each row's start found by dividing its number by the shape, so OpenMP threads share nothing. */
#include "cpu/index.h"

#include <string.h>

/* Below this many elements a thread team costs more than it saves. */
#define PARALLEL_MIN 32768

/* Offsets of row r (dims 0..ndim-2) under two sets of strides. */
static void row_offsets(int64_t r, int ndim, const int64_t *shape, const int64_t *s1,
                        const int64_t *s2, int64_t *o1, int64_t *o2) {
  int64_t a = 0, b = 0;
  for (int d = ndim - 2; d >= 0; d--) {
    int64_t c = r % shape[d];
    r /= shape[d];
    a += c * s1[d];
    b += c * s2[d];
  }
  *o1 = a;
  *o2 = b;
}

/* A run of len elements at stride xs: the common case where one index serves a whole row
 * (embedding rows, index_select off its dim). */
#define COPY_RUN(T)                                          \
  do {                                                       \
    T *o = (T *)out;                                         \
    const T *s = (const T *)src;                             \
    for (int64_t j = 0; j < len; j++) o[j] = s[j * xs];      \
  } while (0)

static void copy_run(char *out, const char *src, size_t es, int64_t len, int64_t xs) {
  if (xs == 1) {
    memcpy(out, src, (size_t)len * es);
    return;
  }
  switch (es) {
  case 1: COPY_RUN(uint8_t); break;
  case 2: COPY_RUN(uint16_t); break;
  case 4: COPY_RUN(uint32_t); break;
  case 8: COPY_RUN(uint64_t); break;
  default:
    for (int64_t j = 0; j < len; j++) memcpy(out + j * (int64_t)es, src + j * xs * (int64_t)es, es);
  }
}

#define TAKE_ROW(T)                                                                   \
  do {                                                                                \
    T *o = (T *)out;                                                                  \
    const T *s = (const T *)x;                                                        \
    for (int64_t j = 0; j < len; j++) o[j] = s[xo + j * xs + idx[io + j * is] * pick]; \
  } while (0)

static void take_row(char *out, const char *x, size_t es, int64_t len, int64_t xo, int64_t xs,
                     const int64_t *idx, int64_t io, int64_t is, int64_t pick) {
  if (is == 0) {
    copy_run(out, x + (xo + idx[io] * pick) * (int64_t)es, es, len, xs);
    return;
  }
  switch (es) {
  case 1: TAKE_ROW(uint8_t); break;
  case 2: TAKE_ROW(uint16_t); break;
  case 4: TAKE_ROW(uint32_t); break;
  case 8: TAKE_ROW(uint64_t); break;
  default:
    for (int64_t j = 0; j < len; j++)
      memcpy(out + j * (int64_t)es, x + (xo + j * xs + idx[io + j * is] * pick) * (int64_t)es, es);
  }
}

void eng_kcpu_take(void *out, const void *x, size_t elem_size, int ndim, const int64_t *shape,
                   const int64_t *x_stride, const int64_t *idx, const int64_t *idx_stride,
                   int64_t pick_stride) {
  int64_t len = ndim ? shape[ndim - 1] : 1, rows = 1;
  for (int d = 0; d < ndim - 1; d++) rows *= shape[d];
  if (len == 0 || rows == 0) return;
  int64_t xs = ndim ? x_stride[ndim - 1] : 0, is = ndim ? idx_stride[ndim - 1] : 0;
#pragma omp parallel for schedule(static) if (rows * len >= PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++) {
    int64_t xo, io;
    row_offsets(r, ndim, shape, x_stride, idx_stride, &xo, &io);
    take_row((char *)out + r * len * (int64_t)elem_size, x, elem_size, len, xo, xs, idx, io, is,
             pick_stride);
  }
}

int64_t eng_kcpu_first_out_of_range(const int64_t *idx, int64_t n, int64_t limit) {
  for (int64_t i = 0; i < n; i++)
    if (idx[i] < 0 || idx[i] >= limit) return i;
  return -1;
}
