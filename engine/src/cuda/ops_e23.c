/* e23 and e23_backward on CUDA: contiguous inputs, a scratch buffer sized by the kernels' plan,
 * the persistent kernels of kernels/cuda/e23.cu on the current stream, and for the backward the
 * weight gradients: dW_h = dxw^T h_prev (eng_es_cuda_prev_weight_grad), dW_write = dw^T hs (one
 * GEMM each over all B*T steps) and db = sum of dxw (unless the kernels summed it). */
#include <cuda_runtime.h>

#include "cuda/cuda_internal.h"
#include "cuda/e23.h"
#include "ops/e_series.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

static eng_status_t cuda_failed(const char *op, int rc) {
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)rc));
}

/* A u8 buffer of the bytes the kernels asked for (NULL when none). */
static eng_status_t scratch(const char *op, eng_dtype_t dt, const int64_t *s, int64_t N, int64_t C,
                            int backward, eng_device_t dev, eng_tensor_t **out) {
  size_t bytes = 0;
  *out = NULL;
  int rc = eng_kcuda_e23_scratch(dt, s[0], N, s[2], C, backward, &bytes);
  if (rc) return cuda_failed(op, rc);
  if (!bytes) return ENG_OK;
  const int64_t n = (int64_t)bytes;
  return eng_tensor_empty(&n, 1, ENG_U8, dev, out);
}

eng_status_t eng_cuda_e23(const eng_op_call_t *call) {
  const char *op = eng_call_name(call);
  eng_tensor_t *c[6] = {NULL}, *work = NULL;
  const eng_device_t dev = call->out[0]->storage->device;
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(dev.index, &stream);
  if (!st) st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  const int64_t *s = c[0]->shape, N = call->out[2]->shape[1], C = call->attrs.i[1];
  st = scratch(op, c[0]->dtype, s, N, C, 0, dev, &work);
  if (!st) {
    int rc = eng_kcuda_e23_forward(
        c[0]->dtype, s[0], s[1], N, s[2], C, eng_tensor_data(c[0]), eng_tensor_data(c[1]),
        eng_tensor_data(c[2]), eng_tensor_data(c[3]), eng_data_or_null(c[4]),
        eng_data_or_null(c[5]), eng_tensor_data(call->out[0]), eng_tensor_data(call->out[1]),
        eng_tensor_data(call->out[2]), eng_tensor_data(call->out[3]),
        work ? eng_tensor_data(work) : NULL, stream);
    if (rc) st = cuda_failed(op, rc);
  }
  eng_tensor_release(work);
  for (int k = 0; k < 6; k++) eng_tensor_release(c[k]);
  return st;
}

eng_status_t eng_cuda_e23_backward(const eng_op_call_t *call) {
  const char *op = eng_call_name(call);
  eng_tensor_t *c[10] = {NULL}, *ck = NULL, *work = NULL, *dw = NULL;
  const eng_device_t dev = call->out[0]->storage->device;
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(dev.index, &stream);
  if (!st) st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  const eng_dtype_t dt = c[0]->dtype;
  const int64_t *s = c[0]->shape, N = call->out[5]->shape[1], C = call->attrs.i[0];  // dtape0 [B,N,d]
  st = eng_tensor_to_dtype(c[6], eng_es_state_dtype(dt), &ck);
  if (!st) st = scratch(op, dt, s, N, C, 1, dev, &work);
  if (!st) st = eng_tensor_empty(s, 3, dt, dev, &dw);
  int db_done = 0;
  if (!st) {
    int rc = eng_kcuda_e23_backward(
        dt, s[0], s[1], N, s[2], C, eng_tensor_data(c[0]), eng_tensor_data(c[1]),
        eng_tensor_data(c[2]), eng_tensor_data(c[3]), eng_data_or_null(c[4]), eng_tensor_data(c[5]),
        eng_tensor_data(ck), eng_tensor_data(c[7]), eng_data_or_null(c[8]), eng_data_or_null(c[9]),
        eng_tensor_data(call->out[0]), eng_tensor_data(dw), eng_tensor_data(call->out[4]),
        eng_tensor_data(call->out[5]), eng_tensor_data(call->out[3]), &db_done,
        work ? eng_tensor_data(work) : NULL, stream);
    if (rc) st = cuda_failed(op, rc);
  }
  eng_tensor_release(work);
  if (!st) st = eng_es_cuda_prev_weight_grad(call->out[0], c[5], c[4], call->out[1]);
  if (!st) st = eng_es_cuda_weight_grad(dw, c[5], call->out[2]);
  if (!st && !db_done) st = eng_es_cuda_bias_grad(call->out[0], call->out[3]);
  eng_tensor_release(dw), eng_tensor_release(ck);
  for (int k = 0; k < 10; k++) eng_tensor_release(c[k]);
  return st;
}
