/* The creation ops on CUDA (arange/linspace, eye, rand, randn, randint): the output is a fresh
 * contiguous tensor; the kernels reproduce the CPU's values bit for bit. */
#include "cuda/create.h"
#include "cuda/cuda_internal.h"
#include "cuda/random.h"
#include "ops/ops_internal.h"

/* The stream of the output's device. */
static eng_status_t out_stream(const eng_op_call_t *call, cudaStream_t *stream) {
  return eng_cuda_stream_of(call->out[0]->storage->device.index, stream);
}

static eng_status_t launched(const char *op, int err) {
  if (!err) return ENG_OK;
  cudaGetLastError(); /* clear it, so that the next check does not report it again */
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)err));
}

eng_status_t eng_cuda_arange(const eng_op_call_t *call) {
  const eng_op_attrs_t *a = &call->attrs;
  eng_tensor_t *t = call->out[0];
  cudaStream_t stream;
  eng_status_t st = out_stream(call, &stream);
  if (st) return st;
  return launched("arange", eng_kcuda_arange(eng_tensor_data(t), t->dtype, a->i[0], a->f[0], a->f[1],
                                             a->f[2], (a->flags & ENG_ATTR_LINSPACE) != 0, stream));
}

eng_status_t eng_cuda_eye(const eng_op_call_t *call) {
  eng_tensor_t *t = call->out[0];
  cudaStream_t stream;
  eng_status_t st = out_stream(call, &stream);
  if (st) return st;
  return launched("eye", eng_kcuda_eye(eng_tensor_data(t), t->dtype, call->attrs.i[0],
                                       call->attrs.i[1], stream));
}

eng_status_t eng_cuda_rand(const eng_op_call_t *call) {
  const eng_op_attrs_t *a = &call->attrs;
  eng_tensor_t *t = call->out[0];
  cudaStream_t stream;
  eng_status_t st = out_stream(call, &stream);
  if (st) return st;
  return launched("rand", eng_kcuda_uniform(eng_tensor_data(t), t->dtype, eng_tensor_numel(t), a->u[0],
                                            a->u[1], a->f[0], a->f[1], stream));
}

eng_status_t eng_cuda_randn(const eng_op_call_t *call) {
  const eng_op_attrs_t *a = &call->attrs;
  eng_tensor_t *t = call->out[0];
  cudaStream_t stream;
  eng_status_t st = out_stream(call, &stream);
  if (st) return st;
  return launched("randn", eng_kcuda_normal(eng_tensor_data(t), t->dtype, eng_tensor_numel(t), a->u[0],
                                            a->u[1], a->f[0], a->f[1], stream));
}

eng_status_t eng_cuda_randint(const eng_op_call_t *call) {
  const eng_op_attrs_t *a = &call->attrs;
  eng_tensor_t *t = call->out[0];
  cudaStream_t stream;
  eng_status_t st = out_stream(call, &stream);
  if (st) return st;
  return launched("randint",
                  eng_kcuda_randint(eng_tensor_data(t), t->dtype, eng_tensor_numel(t), a->u[0], a->u[1],
                                    (int64_t)a->f[0], (uint64_t)(a->f[1] - a->f[0]), stream));
}
