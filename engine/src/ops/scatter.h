/* What the CPU and CUDA adapters of index_add and scatter_add share (engine/src/ops/scatter.c,
 * engine/src/cuda/ops_scatter.c): both ops are one scatter-add with different strides, run on an
 * accumulator that starts as a copy of base. */
#ifndef ENG_OPS_SCATTER_H
#define ENG_OPS_SCATTER_H

#include "eng_registry.h"

/* One scatter-add, as eng_kcpu_scatter_add documents it, plus the index tensor (contiguous i64
 * on the op's device) and the bound its values must respect. */
typedef struct {
  const char *op;
  void *acc;
  eng_dtype_t acc_dt;
  const void *src;
  eng_dtype_t src_dt;
  const eng_tensor_t *idx;
  int ndim, dim;
  int64_t shape[ENG_MAX_DIMS], acc_stride[ENG_MAX_DIMS], src_stride[ENG_MAX_DIMS],
      idx_stride[ENG_MAX_DIMS];
  int64_t pick_stride, limit;
} eng_scatter_args_t;

/* The backend half: checks the indices against [0, limit) (ENG_ERR_INDEX "op: index V out of
 * range for dim D of size S") and runs the additions. */
typedef eng_status_t (*eng_scatter_backend_fn)(const eng_scatter_args_t *a);

/* The shared body: out = base (through an f32 accumulator when out is f16/bf16, rounded once at
 * the end), then the backend adds src at the indexed places. */
eng_status_t eng_scatter_run(const eng_op_call_t *call, eng_scatter_backend_fn add);

#endif
