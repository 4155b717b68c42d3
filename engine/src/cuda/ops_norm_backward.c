/* The backward kernels (softmax_backward, rms/layer_norm_backward, cross_entropy_backward) and
 * add_rms_norm on CUDA: contiguous (device) copies of the inputs where needed, as the CPU adapters
 * make, then the launchers of kernels/cuda/{norm,softmax,loss}_backward.cu and add_rms_norm.cu on
 * the current stream, with their workspaces from the caching allocator (stream-ordered, so
 * freeing right after the launch is safe, and capture-safe). Nothing here synchronises. */
#include <cuda_runtime.h>

#include "cuda/cuda_internal.h"
#include "cuda/norm_backward.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

static eng_status_t cuda_failed(const char *op, int rc) {
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)rc));
}

static eng_kcuda_arg_t arg_of(const eng_tensor_t *t) {
  eng_kcuda_arg_t a = {t ? eng_tensor_data(t) : NULL, t ? t->dtype : ENG_F32};
  return a;
}

eng_status_t eng_cuda_softmax_backward(const eng_op_call_t *call) {
  eng_tensor_t *gx = call->out[0], *c[2] = {NULL, NULL};
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(gx->storage->device.index, &stream);
  if (!st) st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  int64_t outer, n, inner;
  const int dim = (int)call->attrs.i[0];
  eng_dims_split(c[1], dim, dim + 1, &outer, &n, &inner);
  int rc = eng_kcuda_softmax_backward(c[1]->dtype, call->attrs.i[1] != 0, eng_tensor_data(c[0]),
                                      eng_tensor_data(c[1]), eng_tensor_data(gx), outer, n, inner,
                                      stream);
  eng_tensor_release(c[0]);
  eng_tensor_release(c[1]);
  return rc ? cuda_failed(eng_call_name(call), rc) : ENG_OK;
}

/* rms_norm_backward (in: gy, x, w) and layer_norm_backward (in: gy, x, w, b). A gy dtype that the
 * kernels do not pair with x's (they take gy of x's dtype, or any gy against an f32 x) is
 * converted to x's first. */
static eng_status_t norm_backward(const eng_op_call_t *call) {
  const int layer = call->id == ENG_OP_LAYER_NORM_BACKWARD;
  eng_tensor_t *c[4] = {NULL, NULL, NULL, NULL}, *gy = NULL;
  const int dev = call->out[0]->storage->device.index;
  void *ws = NULL;
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(dev, &stream);
  if (!st) st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  const eng_tensor_t *x = c[1];
  const int64_t d = x->shape[x->ndim - 1], rows = d ? eng_tensor_numel(x) / d : 0;
  if (eng_kcuda_norm_backward_pair(c[0]->dtype, x->dtype)) {
    gy = c[0];
    eng_tensor_retain(gy);
  } else if ((st = eng_tensor_to_dtype(c[0], x->dtype, &gy))) {
    goto done;
  }
  eng_tensor_t *gw = c[2] ? call->out[1] : NULL;
  eng_tensor_t *gb = layer && c[3] ? call->out[c[2] ? 2 : 1] : NULL;
  if ((gw || gb) && (st = eng_cuda_malloc(dev, eng_kcuda_norm_backward_workspace(x->dtype, rows, d, layer),
                                          (eng_stream_t)stream, &ws)))
    goto done;
  int rc = eng_kcuda_norm_backward(layer, arg_of(gy), arg_of(x), arg_of(c[2]), call->attrs.f[0],
                                   eng_tensor_data(call->out[0]), gw ? eng_tensor_data(gw) : NULL,
                                   gw ? gw->dtype : ENG_F32, gb ? eng_tensor_data(gb) : NULL,
                                   gb ? gb->dtype : ENG_F32, rows, d, ws, stream);
  if (rc) st = cuda_failed(eng_call_name(call), rc);
done:
  if (ws) eng_cuda_free(dev, ws);
  eng_tensor_release(gy);
  for (int k = 0; k < 4; k++) eng_tensor_release(c[k]);
  return st;
}

eng_status_t eng_cuda_rms_norm_backward(const eng_op_call_t *call) { return norm_backward(call); }

eng_status_t eng_cuda_layer_norm_backward(const eng_op_call_t *call) { return norm_backward(call); }

eng_status_t eng_cuda_cross_entropy_backward(const eng_op_call_t *call) {
  eng_tensor_t *c[3] = {NULL, NULL, NULL}, *g = call->out[0];
  const int dev = g->storage->device.index;
  void *ws = NULL;
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(dev, &stream);
  if (!st) st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  const eng_tensor_t *x = c[0], *t = c[1];
  const int64_t cls = x->shape[x->ndim - 1], rows = eng_tensor_numel(t);
  st = eng_cuda_malloc(dev, eng_kcuda_cross_entropy_backward_workspace(), (eng_stream_t)stream, &ws);
  if (!st) {
    int rc = eng_kcuda_cross_entropy_backward(x->dtype, eng_tensor_data(x), t->dtype,
                                              eng_tensor_data(t), arg_of(c[2]), eng_tensor_data(g),
                                              rows, cls, call->attrs.i[0], ws, stream);
    if (rc) st = cuda_failed(eng_call_name(call), rc);
    eng_cuda_free(dev, ws);
  }
  for (int k = 0; k < 3; k++) eng_tensor_release(c[k]);
  return st;
}

eng_status_t eng_cuda_add_rms_norm(const eng_op_call_t *call) {
  eng_tensor_t *c[3] = {NULL, NULL, NULL}, *y = call->out[0], *h = call->out[1];
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(y->storage->device.index, &stream);
  if (!st) st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  const eng_tensor_t *x = c[0];
  const int64_t d = x->shape[x->ndim - 1], rows = d ? eng_tensor_numel(x) / d : 0;
  int rc = eng_kcuda_add_rms_norm(arg_of(c[0]), arg_of(c[1]), arg_of(c[2]), call->attrs.f[0],
                                  eng_tensor_data(y), eng_tensor_data(h), h->dtype, rows, d, stream);
  for (int k = 0; k < 3; k++) eng_tensor_release(c[k]);
  return rc ? cuda_failed(eng_call_name(call), rc) : ENG_OK;
}
