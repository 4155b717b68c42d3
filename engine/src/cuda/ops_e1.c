/* e1 and e1_backward on CUDA: contiguous inputs, the persistent kernels of kernels/cuda/e1.cu on
 * the current stream, and for the backward the weight gradients as registry ops on the result:
 * dW_h = dxw^T h_prev (one GEMM over all B*T steps) and db = sum of dxw. */
#include <cuda_runtime.h>

#include "cuda/cuda_internal.h"
#include "cuda/e1.h"
#include "ops/e_series.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

static eng_status_t cuda_failed(const char *op, int rc) {
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)rc));
}

eng_status_t eng_cuda_e1(const eng_op_call_t *call) {
  eng_tensor_t *c[5] = {NULL};
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(call->out[0]->storage->device.index, &stream);
  if (!st) st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  const int64_t *s = c[0]->shape;
  int rc =
      eng_kcuda_e1_forward(c[0]->dtype, s[0], s[1], s[2], eng_tensor_data(c[0]),
                           eng_tensor_data(c[1]), eng_tensor_data(c[2]), eng_tensor_data(c[3]),
                           eng_data_or_null(c[4]), eng_tensor_data(call->out[0]),
                           eng_tensor_data(call->out[1]), eng_tensor_data(call->out[2]), stream);
  for (int k = 0; k < 5; k++) eng_tensor_release(c[k]);
  return rc ? cuda_failed(eng_call_name(call), rc) : ENG_OK;
}

eng_status_t eng_es_cuda_weight_grad(eng_tensor_t *g, eng_tensor_t *x, eng_tensor_t *dW) {
  const int64_t BT = g->shape[0] * g->shape[1], d = g->shape[2], flat[2] = {BT, d};
  eng_tensor_t *gv = NULL, *gt = NULL, *xv = NULL;
  eng_status_t st = eng_tensor_view(g, flat, 2, &gv);
  if (!st) st = eng_tensor_transpose(gv, 0, 1, &gt);
  if (!st) st = eng_tensor_view(x, flat, 2, &xv);
  if (!st) {
    eng_tensor_t *in[2] = {gt, xv};
    eng_op_call_t mm = {.id = ENG_OP_MATMUL, .n_in = 2, .in = in, .n_out = 1};
    mm.out[0] = dW;
    st = eng_op_dispatch(&mm);
  }
  eng_tensor_release(gv), eng_tensor_release(gt), eng_tensor_release(xv);
  return st;
}

eng_status_t eng_es_cuda_bias_grad(eng_tensor_t *g, eng_tensor_t *db) {
  eng_tensor_t *in[1] = {g};
  eng_op_call_t sum = {.id = ENG_OP_SUM, .n_in = 1, .in = in, .n_out = 1};
  sum.attrs.i[0] = 0;
  sum.attrs.i[1] = 1;
  sum.attrs.ni = 2;
  sum.out[0] = db;
  return eng_op_dispatch(&sum);
}

eng_status_t eng_cuda_e1_backward(const eng_op_call_t *call) {
  const char *op = eng_call_name(call);
  eng_tensor_t *c[6] = {NULL}, *hprev = NULL;
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(call->out[0]->storage->device.index, &stream);
  if (!st) st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  const eng_tensor_t *z = c[0];
  const int64_t *s = z->shape;
  int rc = eng_kcuda_e1_backward(
      z->dtype, s[0], s[1], s[2], eng_tensor_data(z), eng_tensor_data(c[1]), eng_tensor_data(c[3]),
      eng_tensor_data(c[4]), eng_data_or_null(c[5]), eng_tensor_data(call->out[0]),
      eng_tensor_data(call->out[1]), eng_tensor_data(call->out[4]), stream);
  if (rc) st = cuda_failed(op, rc);
  if (!st) st = eng_tensor_empty(s, 3, z->dtype, call->out[0]->storage->device, &hprev);
  if (!st && (rc = eng_kcuda_seq_shift(z->dtype, s[0], s[1], s[2], eng_tensor_data(c[3]),
                                       eng_data_or_null(c[2]), eng_tensor_data(hprev), stream)))
    st = cuda_failed(op, rc);
  if (!st) st = eng_es_cuda_weight_grad(call->out[0], hprev, call->out[2]);
  if (!st) st = eng_es_cuda_bias_grad(call->out[0], call->out[3]);
  eng_tensor_release(hprev);
  for (int k = 0; k < 6; k++) eng_tensor_release(c[k]);
  return st;
}
