/* softmax, log_softmax, layer_norm and rms_norm on CUDA: contiguous (device) copies of the inputs
 * where needed, as the CPU adapters make, then the launchers of kernels/cuda/norm.cu on the
 * current stream. */
#include <cuda_runtime.h>

#include "cuda/cuda_internal.h"
#include "cuda/norm.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

static eng_status_t cuda_failed(const char *op, int rc) {
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)rc));
}

eng_status_t eng_cuda_softmax(const eng_op_call_t *call) {
  eng_tensor_t *x = call->in[0], *y = call->out[0], *xc = NULL;
  int64_t outer, n, inner;
  eng_dims_split(x, (int)call->attrs.i[0], (int)call->attrs.i[0] + 1, &outer, &n, &inner);
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(y->storage->device.index, &stream);
  if (!st) st = eng_tensor_contiguous(x, &xc);
  if (st) return st;
  int rc = eng_kcuda_softmax(x->dtype, call->id == ENG_OP_LOG_SOFTMAX, eng_tensor_data(xc),
                             eng_tensor_data(y), outer, n, inner, stream);
  eng_tensor_release(xc);
  return rc ? cuda_failed(eng_call_name(call), rc) : ENG_OK;
}


/* layer_norm (in: x, weight, bias) or rms_norm (in: x, weight) over the last dim of x. */
static eng_status_t norm(const eng_op_call_t *call) {
  eng_tensor_t *y = call->out[0], *c[3] = {NULL, NULL, NULL};
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(y->storage->device.index, &stream);
  if (!st) st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  const eng_tensor_t *x = c[0];
  const int64_t d = x->shape[x->ndim - 1], rows = d ? eng_tensor_numel(x) / d : 0;
  const double eps = call->attrs.f[0];
  int rc = call->id == ENG_OP_LAYER_NORM
               ? eng_kcuda_layer_norm(x->dtype, eng_tensor_data(x), eng_data_or_null(c[1]),
                                      eng_data_or_null(c[2]), eng_tensor_data(y), rows, d, eps, stream)
               : eng_kcuda_rms_norm(x->dtype, eng_tensor_data(x), eng_data_or_null(c[1]),
                                    eng_tensor_data(y), rows, d, eps, stream);
  for (int k = 0; k < 3; k++) eng_tensor_release(c[k]);
  return rc ? cuda_failed(eng_call_name(call), rc) : ENG_OK;
}

eng_status_t eng_cuda_layer_norm(const eng_op_call_t *call) { return norm(call); }

eng_status_t eng_cuda_rms_norm(const eng_op_call_t *call) { return norm(call); }
