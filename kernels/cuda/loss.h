/* CUDA cross-entropy: the function of kernels/cpu/loss.h on the device, with the target check
 * done on the device too, so that nothing here synchronizes. The launcher returns a cudaError_t as
 * int (0 = success). */
#ifndef ENG_KCUDA_LOSS_H
#define ENG_KCUDA_LOSS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of device workspace eng_kcuda_cross_entropy needs. */
size_t eng_kcuda_cross_entropy_workspace(eng_dtype_t dt, int64_t rows);

/* *y = the mean, over the rows r of contiguous logits x [rows, c] (floating dtype dt) whose
 * target[r] != ignore_index, of logsumexp(x[r, :]) - x[r, target[r]]; y is f64 for f64 logits,
 * else f32; no such row gives NaN. Targets are contiguous [rows] of dtype target_dt (i32, i64 or
 * u8). Row losses are computed in f32 (f64 for f64) and summed in double.
 * A target that is not ignored and lies outside [0, c) makes its row's loss NaN (so the mean is
 * NaN), and the workspace's first two int64 receive {its row, its value} for the first such row,
 * or {-1, 0} when there is none: a caller that may synchronize reads them back to report it. */
int eng_kcuda_cross_entropy(eng_dtype_t dt, const void *x, eng_dtype_t target_dt,
                            const void *target, void *y, int64_t rows, int64_t c,
                            int64_t ignore_index, void *workspace, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
