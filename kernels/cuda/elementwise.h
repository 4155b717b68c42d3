/* Elementwise CUDA launchers: unary, binary (broadcasting), clamp, where. The output is a
 * contiguous tensor of the broadcast shape; each input is described by strides over that shape
 * (0 where it is broadcast). They compute what kernels/cpu/elementwise does: f16/bf16 in f32 and
 * rounded once (to nearest even) on store, f32/f64 in their own precision, integers exactly
 * (wrapping). Each returns a cudaError_t as int (0 = success) and never synchronizes. */
#ifndef ENG_KCUDA_ELEMENTWISE_H
#define ENG_KCUDA_ELEMENTWISE_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ENG_KCUDA_EW_MAX_IN 3

/* The iteration space of one elementwise op, with size-1 dims dropped and dims merged where every
 * operand steps through them as one (so a contiguous op has ndim 1 and [N,D] + [D] has ndim 2). */
typedef struct {
  int64_t n; /* output elements, the product of shape */
  int ndim;  /* >= 1 */
  int64_t shape[ENG_MAX_DIMS];
  int64_t stride[ENG_KCUDA_EW_MAX_IN][ENG_MAX_DIMS]; /* per input, in elements; never negative */
} eng_kcuda_ew_geom_t;

/* y = op(x), x and y of dtype dt. Integer dtypes take NEG (i32, i64), ABS and RELU. */
int eng_kcuda_unary(eng_unary_op_t op, eng_dtype_t dt, void *y, const void *x,
                    const eng_kcuda_ew_geom_t *g, cudaStream_t stream);

/* out = op(a, b), a and b of dtype dt, out of dt or u8 for the comparisons. Integers take every op
 * but DIV. An integer POW with a negative exponent writes 0 there and, when bad_pow (device
 * memory) is not NULL, sets *bad_pow to 1. */
int eng_kcuda_binary(eng_binary_op_t op, eng_dtype_t dt, void *out, const void *a, const void *b,
                     const eng_kcuda_ew_geom_t *g, int *bad_pow, cudaStream_t stream);

/* y = min(max(x, lo), hi); NaN stays NaN. Floating dtypes use lo/hi (-inf/+inf for an open side,
 * rounded to f32 for f32/f16/bf16); integer dtypes use ilo/ihi, already inside the dtype's range.
 */
int eng_kcuda_clamp(eng_dtype_t dt, double lo, double hi, int64_t ilo, int64_t ihi, void *y,
                    const void *x, const eng_kcuda_ew_geom_t *g, cudaStream_t stream);

/* out = cond != 0 ? a : b, moving raw elements of `elsize` bytes (1, 2, 4 or 8); cond of any
 * dtype, NaN counting as true and -0 as false. */
int eng_kcuda_where(eng_dtype_t cond_dt, size_t elsize, void *out, const void *cond, const void *a,
                    const void *b, const eng_kcuda_ew_geom_t *g, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
