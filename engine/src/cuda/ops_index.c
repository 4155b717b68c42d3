/* embedding, index_select and gather on CUDA: one gather kernel with the strides of the CPU
 * adapters (engine/src/ops/index.c), reading the index tensor in its own dtype and layout.
 *
 * Bounds: outside graph capture, a small kernel finds the first out-of-range index and one 8-byte
 * read brings it back, so a bad id is the same ENG_ERR_INDEX (same message, same value) as on the
 * CPU. While a graph is being captured nothing may synchronise: the check is skipped, and the
 * kernel writes NaN (float dtypes) or 0 (integer dtypes) where an index is out of range. */
#include <cuda_runtime.h>
#include <string.h>

#include "cuda/cuda_internal.h"
#include "cuda/index.h"
#include "ops/ops_internal.h"

static eng_status_t cuda_failed(const char *op, int rc) {
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)rc));
}

/* The value at row-major position pos of idx, read back from the device. */
static eng_status_t read_index(int dev, cudaStream_t stream, const eng_tensor_t *idx, int64_t pos,
                               int64_t *value) {
  int64_t off = 0;
  for (int d = idx->ndim - 1; d >= 0; d--) {
    off += (pos % idx->shape[d]) * idx->stride[d];
    pos /= idx->shape[d];
  }
  size_t es = eng_dtype_size(idx->dtype);
  unsigned char bytes[8] = {0};
  eng_status_t st = eng_cuda_copy_d2h(dev, bytes, (const char *)eng_tensor_data(idx) + off * (int64_t)es,
                                      es, (eng_stream_t)stream);
  if (st) return st;
  int32_t i32;
  switch (idx->dtype) {
  case ENG_I64: memcpy(value, bytes, sizeof *value); break;
  case ENG_I32:
    memcpy(&i32, bytes, sizeof i32);
    *value = i32;
    break;
  default: *value = bytes[0]; break; /* u8 */
  }
  return ENG_OK;
}

/* ENG_OK when every index is in [0, limit) or when capturing (see above); else *bad = the first
 * offending value and *found = 1. */
static eng_status_t check_range(const char *op, int dev, cudaStream_t stream,
                                const eng_tensor_t *idx, int64_t limit, int *found, int64_t *bad) {
  *found = 0;
  if (eng_cuda_is_capturing(dev) || eng_tensor_numel(idx) == 0) return ENG_OK;
  void *buf = NULL;
  unsigned long long first = 0;
  eng_status_t st = eng_cuda_malloc(dev, sizeof first, (eng_stream_t)stream, &buf);
  if (st) return st;
  int rc = eng_kcuda_first_out_of_range(eng_tensor_data(idx), idx->dtype, idx->ndim, idx->shape,
                                        idx->stride, limit, buf, stream);
  st = rc ? cuda_failed(op, rc)
          : eng_cuda_copy_d2h(dev, &first, buf, sizeof first, (eng_stream_t)stream);
  eng_cuda_free(dev, buf);
  if (st || first == ~0ull) return st;
  *found = 1;
  return read_index(dev, stream, idx, (int64_t)first, bad);
}

/* Checks idx against [0, limit) (failing with the CPU op's message: embedding's when dim < 0),
 * then gathers into out. */
static eng_status_t take(const char *op, const eng_op_call_t *call, const eng_tensor_t *x,
                         const eng_tensor_t *idx, const int64_t *x_stride,
                         const int64_t *idx_stride, int64_t pick, int64_t limit, int dim) {
  eng_tensor_t *out = call->out[0];
  int dev = out->storage->device.index, found = 0;
  int64_t bad = 0;
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(dev, &stream);
  if (!st) st = check_range(op, dev, stream, idx, limit, &found, &bad);
  if (st) return st;
  if (found && dim < 0)
    return eng_error(ENG_ERR_INDEX, "%s: id %lld out of range for %lld rows", op, (long long)bad,
                     (long long)limit);
  if (found)
    return eng_error(ENG_ERR_INDEX, "%s: index %lld out of range for dim %d of size %lld", op,
                     (long long)bad, dim, (long long)limit);
  int rc = eng_kcuda_take(eng_tensor_data(out), eng_tensor_data(x), x->dtype, out->ndim, out->shape,
                          x_stride, eng_tensor_data(idx), idx->dtype, idx_stride, pick, limit,
                          stream);
  return rc ? cuda_failed(op, rc) : ENG_OK;
}

/* in[0] ids, in[1] weight [V, D...]; out [ids..., D...] */
eng_status_t eng_cuda_embedding(const eng_op_call_t *call) {
  const eng_tensor_t *ids = call->in[0], *w = call->in[1];
  int p = ids->ndim, q = w->ndim - 1;
  int64_t x_stride[ENG_MAX_DIMS] = {0}, idx_stride[ENG_MAX_DIMS] = {0};
  memcpy(idx_stride, ids->stride, sizeof(int64_t) * (size_t)p);
  memcpy(x_stride + p, w->stride + 1, sizeof(int64_t) * (size_t)q);
  return take("embedding", call, w, ids, x_stride, idx_stride, w->stride[0], w->shape[0], -1);
}

/* in[0] x, in[1] 1-D index, attrs.i[0] dim */
eng_status_t eng_cuda_index_select(const eng_op_call_t *call) {
  const eng_tensor_t *x = call->in[0], *idx = call->in[1];
  int dim = (int)call->attrs.i[0];
  int64_t x_stride[ENG_MAX_DIMS], idx_stride[ENG_MAX_DIMS] = {0};
  memcpy(x_stride, x->stride, sizeof(int64_t) * (size_t)x->ndim);
  x_stride[dim] = 0; /* along dim the index picks the element */
  idx_stride[dim] = idx->stride[0];
  return take("index_select", call, x, idx, x_stride, idx_stride, x->stride[dim], x->shape[dim], dim);
}

/* in[0] x, in[1] index (out's shape), attrs.i[0] dim */
eng_status_t eng_cuda_gather(const eng_op_call_t *call) {
  const eng_tensor_t *x = call->in[0], *idx = call->in[1];
  int dim = (int)call->attrs.i[0];
  int64_t x_stride[ENG_MAX_DIMS];
  memcpy(x_stride, x->stride, sizeof(int64_t) * (size_t)x->ndim);
  x_stride[dim] = 0;
  return take("gather", call, x, idx, x_stride, idx->stride, x->stride[dim], x->shape[dim], dim);
}
