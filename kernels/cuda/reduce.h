/* CUDA reductions and argmax over the middle dim of a contiguous [outer, n, inner] array, the
 * layout the op layer prepares (as for kernels/cpu/reduce.h), computing the same functions as the
 * CPU kernels. Launchers return a cudaError_t as int (0 = success) and never synchronize.
 *
 * When the outputs are too few to keep the GPU busy, n is split over more threads and the partial
 * results go through a device workspace, whose size the *_workspace functions give for the same
 * arguments (0 when none is needed; the workspace may then be NULL). */
#ifndef ENG_KCUDA_REDUCE_H
#define ENG_KCUDA_REDUCE_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

size_t eng_kcuda_reduce_workspace(eng_reduce_op_t op, eng_dtype_t dt, int64_t outer, int64_t n,
                                  int64_t inner);

/* y[o, i] = op over x[o, :, i]; y is contiguous [outer, inner]. Floating dtypes fold in double
 * (f64, f32) or f32 (f16, bf16) and round once into y (x's dtype). Integer dtypes: SUM wraps in
 * int64 and y is i64; MAX/MIN are exact and y has x's dtype. MAX/MIN propagate NaN and need
 * n >= 1; SUM of n = 0 is 0, MEAN/VAR/STD of n = 0 are NaN. VAR/STD are two-pass (mean, then
 * squared deviations) and divide by max(n - correction, 0). */
int eng_kcuda_reduce(eng_reduce_op_t op, eng_dtype_t dt, const void *x, void *y, int64_t outer,
                     int64_t n, int64_t inner, double correction, void *workspace,
                     cudaStream_t stream);

size_t eng_kcuda_argmax_workspace(int64_t outer, int64_t n, int64_t inner);

/* y[o, i] = the first index along n of the max of x[o, :, i]; a NaN counts as the max (the first
 * NaN wins). Any dtype; n >= 1. */
int eng_kcuda_argmax(eng_dtype_t dt, const void *x, int64_t *y, int64_t outer, int64_t n,
                     int64_t inner, void *workspace, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
