/* index_add and scatter_add on CUDA: the shared body of engine/src/ops/scatter.c with the atomic
 * scatter kernel. Bounds: as for gather (eng_ops.h), outside graph capture a small kernel finds
 * the first out-of-range index and one 8-byte read (two when one is found) brings it back, giving
 * the CPU's ENG_ERR_INDEX; during capture nothing may synchronise, so the check is skipped and the
 * kernel skips out-of-range entries (their src values are dropped). */
#include <cuda_runtime.h>

#include "cuda/cuda_internal.h"
#include "cuda/index.h"
#include "cuda/scatter.h"
#include "ops/ops_internal.h"
#include "ops/scatter.h"

static eng_status_t cuda_failed(const char *op, int rc) {
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)rc));
}

/* ENG_ERR_INDEX naming the first index (of the contiguous i64 idx) outside [0, limit). */
static eng_status_t check_range(const eng_scatter_args_t *a, int dev, cudaStream_t stream) {
  const eng_tensor_t *idx = a->idx;
  int64_t n = eng_tensor_numel(idx);
  if (eng_cuda_is_capturing(dev) || n == 0) return ENG_OK;
  void *buf = NULL;
  unsigned long long first = 0;
  eng_status_t st = eng_cuda_malloc(dev, sizeof first, (eng_stream_t)stream, &buf);
  if (st) return st;
  int64_t stride = 1;
  int rc = eng_kcuda_first_out_of_range(eng_tensor_data(idx), ENG_I64, 1, &n, &stride, a->limit,
                                        buf, stream);
  st = rc ? cuda_failed(a->op, rc)
          : eng_cuda_copy_d2h(dev, &first, buf, sizeof first, (eng_stream_t)stream);
  eng_cuda_free(dev, buf);
  if (st || first == ~0ull) return st;
  int64_t bad = 0;
  st = eng_cuda_copy_d2h(dev, &bad, (const int64_t *)eng_tensor_data(idx) + first, sizeof bad,
                         (eng_stream_t)stream);
  if (st) return st;
  return eng_error(ENG_ERR_INDEX, "%s: index %lld out of range for dim %d of size %lld", a->op,
                   (long long)bad, a->dim, (long long)a->limit);
}

static eng_status_t cuda_add(const eng_scatter_args_t *a) {
  int dev = a->idx->storage->device.index;
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(dev, &stream);
  if (!st) st = check_range(a, dev, stream);
  if (st) return st;
  int rc = eng_kcuda_scatter_add(a->acc, a->acc_dt, a->acc_stride, a->pick_stride, a->src,
                                 a->src_dt, a->src_stride, eng_tensor_data(a->idx), a->idx_stride,
                                 a->ndim, a->shape, a->dim, a->limit, stream);
  return rc ? cuda_failed(a->op, rc) : ENG_OK;
}

eng_status_t eng_cuda_index_add(const eng_op_call_t *call) { return eng_scatter_run(call, cuda_add); }
eng_status_t eng_cuda_scatter_add(const eng_op_call_t *call) { return eng_scatter_run(call, cuda_add); }
