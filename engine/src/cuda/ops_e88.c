/* e88 and e88_backward on CUDA: contiguous (device) copies of the inputs where needed, as the
 * CPU adapters make, then the launchers of kernels/cuda/e88.cu on the current stream. */
#include <cuda_runtime.h>

#include "cuda/cuda_internal.h"
#include "cuda/e88.h"
#include "ops/e88.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

/* What the kernels cannot take is said before anything runs. */
static eng_status_t check_supported(const eng_op_call_t *call, const eng_e88_shape_t *s,
                                    int backward) {
  const eng_dtype_t dt = call->in[ENG_E88_Q]->dtype;
  const char *why = NULL;
  if (dt == ENG_F64)
    return eng_error(ENG_ERR_UNSUPPORTED, "%s: f64 is not supported on CUDA (f32, f16, bf16 are)",
                     eng_call_name(call));
  if (!eng_kcuda_e88_supported(s, backward, &why))
    return eng_error(ENG_ERR_UNSUPPORTED, "%s: on CUDA %s (got n_state %lld, head_v_dim %lld, "
                     "ckpt_every %lld)", eng_call_name(call), why, (long long)s->n,
                     (long long)s->v, (long long)s->ckpt_every);
  return ENG_OK;
}

static eng_status_t finish(const eng_op_call_t *call, int rc, eng_tensor_t **c, int n) {
  for (int k = 0; k < n; k++) eng_tensor_release(c[k]);
  if (!rc) return ENG_OK;
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", eng_call_name(call),
                   cudaGetErrorString((cudaError_t)rc));
}

eng_status_t eng_cuda_e88(const eng_op_call_t *call) {
  eng_e88_shape_t s;
  eng_e88_shape_of(call, &s);
  eng_status_t st = check_supported(call, &s, 0);
  if (st) return st;
  cudaStream_t stream;
  eng_tensor_t *c[6];
  if ((st = eng_cuda_stream_of(call->out[0]->storage->device.index, &stream)) ||
      (st = eng_call_contiguous_inputs(call, c)))
    return st;
  int rc = eng_kcuda_e88_forward(
      c[ENG_E88_Q]->dtype, &s, eng_tensor_data(c[ENG_E88_Q]), eng_tensor_data(c[ENG_E88_K]),
      eng_tensor_data(c[ENG_E88_V]), eng_tensor_data(c[ENG_E88_DECAY]),
      eng_data_or_null(c[ENG_E88_G]), eng_data_or_null(c[ENG_E88_S0]),
      eng_tensor_data(call->out[0]), call->n_out > 1 ? eng_tensor_data(call->out[1]) : NULL,
      call->n_out > 2 ? eng_tensor_data(call->out[2]) : NULL, stream);
  return finish(call, rc, c, 6);
}

eng_status_t eng_cuda_e88_backward(const eng_op_call_t *call) {
  eng_e88_shape_t s;
  eng_e88_shape_of(call, &s);
  eng_status_t st = check_supported(call, &s, 1);
  if (st) return st;
  cudaStream_t stream;
  eng_tensor_t *c[9];
  if ((st = eng_cuda_stream_of(call->out[0]->storage->device.index, &stream)) ||
      (st = eng_call_contiguous_inputs(call, c)))
    return st;
  void *o[6];
  for (int k = 0; k < 6; k++) o[k] = eng_tensor_data(call->out[k]);
  int rc = eng_kcuda_e88_backward(
      c[ENG_E88_Q]->dtype, &s, eng_tensor_data(c[ENG_E88_Q]), eng_tensor_data(c[ENG_E88_K]),
      eng_tensor_data(c[ENG_E88_V]), eng_tensor_data(c[ENG_E88_DECAY]),
      eng_data_or_null(c[ENG_E88_G]), eng_tensor_data(c[ENG_E88_CKPT]),
      eng_tensor_data(c[ENG_E88_DY]), eng_data_or_null(c[ENG_E88_DST]), o[0], o[1], o[2], o[3],
      c[ENG_E88_G] ? o[4] : NULL, c[ENG_E88_S0] ? o[5] : NULL, stream);
  return finish(call, rc, c, 9);
}
