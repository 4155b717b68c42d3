/* sum, mean, max, min, var, std and argmax on CUDA: the CPU adapters' [outer, n, inner]
 * preparation (op_common.h, a device copy when x is not laid out that way), then the launchers of
 * kernels/cuda/reduce.cu on the current stream, with a workspace from the caching allocator when
 * the launcher splits the reduced dim over more threads. */
#include <cuda_runtime.h>

#include "cuda/cuda_internal.h"
#include "cuda/reduce.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

static eng_status_t cuda_failed(const char *op, int rc) {
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)rc));
}

eng_status_t eng_cuda_reduce(const eng_op_call_t *call) {
  eng_tensor_t *x = call->in[0], *y = call->out[0], *xc = NULL;
  const eng_reduce_op_t op = (eng_reduce_op_t)(call->id - ENG_OP_SUM);
  const int dev = y->storage->device.index;
  unsigned mask;
  int64_t outer, n, inner;
  cudaStream_t stream;
  void *ws = NULL;
  eng_status_t st = eng_cuda_stream_of(dev, &stream);
  if (!st) st = eng_reduce_mask(call, x, &mask);
  if (!st) st = eng_reduce_layout(x, mask, &xc, &outer, &n, &inner);
  if (st) return st;
  size_t bytes = eng_kcuda_reduce_workspace(op, x->dtype, outer, n, inner);
  if (bytes) st = eng_cuda_malloc(dev, bytes, (eng_stream_t)stream, &ws);
  if (!st) {
    int rc = eng_kcuda_reduce(op, x->dtype, eng_tensor_data(xc), eng_tensor_data(y), outer, n, inner,
                              call->attrs.f[0], ws, stream);
    if (rc) st = cuda_failed(eng_call_name(call), rc);
  }
  if (ws) eng_cuda_free(dev, ws);
  eng_tensor_release(xc);
  return st;
}

eng_status_t eng_cuda_argmax(const eng_op_call_t *call) {
  eng_tensor_t *x = call->in[0], *y = call->out[0], *xc = NULL;
  const int dev = y->storage->device.index;
  int64_t outer, n, inner;
  if (call->attrs.flags & ENG_ATTR_FLATTEN)
    eng_dims_split(x, 0, x->ndim, &outer, &n, &inner);
  else
    eng_dims_split(x, (int)call->attrs.i[0], (int)call->attrs.i[0] + 1, &outer, &n, &inner);
  cudaStream_t stream;
  void *ws = NULL;
  eng_status_t st = eng_cuda_stream_of(dev, &stream);
  if (!st) st = eng_tensor_contiguous(x, &xc);
  if (st) return st;
  size_t bytes = eng_kcuda_argmax_workspace(outer, n, inner);
  if (bytes) st = eng_cuda_malloc(dev, bytes, (eng_stream_t)stream, &ws);
  if (!st) {
    int rc = eng_kcuda_argmax(x->dtype, eng_tensor_data(xc), eng_tensor_data(y), outer, n, inner, ws,
                              stream);
    if (rc) st = cuda_failed("argmax", rc);
  }
  if (ws) eng_cuda_free(dev, ws);
  eng_tensor_release(xc);
  return st;
}
