/* linear on CUDA: act(x @ W^T + b) as one cuBLASLt product over x's rows, with bias and activation
 * in its epilogue (BIAS, RELU_BIAS, GELU_BIAS, or RELU / GELU / DEFAULT without a bias). W [N, K]
 * row-major is W^T stored transposed, so it is read in place with a transpose flag. Where cuBLASLt
 * has no such epilogue, and always for f64, the plain product is followed by a bias/activation kernel. */
#include <cuda_runtime.h>

#include "cuda/bias_act.h"
#include "cuda/cuda_internal.h"
#include "cuda/gemm_operand.h"
#include "eng_ops.h"
#include "ops/ops_internal.h"

static eng_status_t bias_act(eng_tensor_t *y, const eng_tensor_t *bias, int64_t rows, int64_t n,
                             int act, cudaStream_t stream) {
  int rc = eng_kcuda_bias_act(eng_tensor_data(y), bias ? eng_tensor_data(bias) : NULL, y->dtype,
                              rows, n, act, stream);
  return rc ? eng_error(ENG_ERR_DEVICE, "linear: CUDA error: %s", cudaGetErrorString((cudaError_t)rc))
            : ENG_OK;
}

/* The product into out ([rows, N] contiguous), trying the fused epilogue first. */
static eng_status_t product(int dev, cudaStream_t stream, eng_tensor_t *x2, eng_tensor_t *w,
                            const eng_tensor_t *bias, int act, eng_tensor_t *out) {
  int64_t rows = x2->shape[0], n = w->shape[0];
  /* f64 is the checking dtype: cuBLASLt's f64 epilogue evaluates the activation short of double
   * precision (measured 1e-9 relative on an H200), so f64 runs bias and activation separately. */
  int fused = out->dtype != ENG_F64;
  eng_blaslt_gemm_t g = {.dtype = out->dtype, .m = rows, .n = n, .k = w->shape[1], .batch = 1,
                         .c = eng_tensor_data(out),
                         .bias = fused && bias ? eng_tensor_data(bias) : NULL,
                         .act = fused ? act : ENG_ACT_NONE};
  eng_tensor_t *wt = NULL, *hold_x = NULL, *hold_w = NULL;
  eng_status_t st = eng_tensor_transpose(w, 0, 1, &wt);
  if (!st) st = eng_gemm_operand(x2, 0, 0, NULL, &g.a, &hold_x);
  if (!st) st = eng_gemm_operand(wt, 1, 0, NULL, &g.b, &hold_w);
  if (!st) st = eng_blaslt_gemm(dev, (eng_stream_t)stream, &g);
  if (!st && !fused && (bias || act != ENG_ACT_NONE)) st = bias_act(out, bias, rows, n, act, stream);
  if (st == ENG_ERR_UNSUPPORTED && fused && (bias || act != ENG_ACT_NONE)) {
    eng_clear_error();
    g.bias = NULL;
    g.act = ENG_ACT_NONE;
    st = eng_blaslt_gemm(dev, (eng_stream_t)stream, &g);
    if (!st) st = bias_act(out, bias, rows, n, act, stream);
  }
  eng_tensor_release(wt);
  eng_tensor_release(hold_x);
  eng_tensor_release(hold_w);
  return st;
}

eng_status_t eng_cuda_linear(const eng_op_call_t *call) {
  eng_tensor_t *x = call->in[0], *w = call->in[1], *b = call->in[2], *out = call->out[0];
  int act = (int)call->attrs.i[0];
  int dev = out->storage->device.index;
  if (eng_tensor_numel(out) == 0) return ENG_OK;
  int64_t n = w->shape[0], k = w->shape[1], rows = eng_tensor_numel(out) / n;
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(dev, &stream);
  if (st) return st;
  eng_tensor_t *bias = NULL, *x2 = NULL; /* cuBLASLt reads the bias densely */
  if (b && (st = eng_tensor_contiguous(b, &bias))) return st;
  if (k == 0) { /* an empty product is zero: out = act(bias), and act(0) = 0 */
    cudaError_t err = cudaMemsetAsync(eng_tensor_data(out), 0, eng_tensor_nbytes(out), stream);
    st = err ? eng_error(ENG_ERR_DEVICE, "linear: CUDA error: %s", cudaGetErrorString(err)) : ENG_OK;
    if (!st && bias) st = bias_act(out, bias, rows, n, act, stream);
  } else {
    int64_t shape2[2] = {rows, k};
    st = eng_tensor_reshape(x, shape2, 2, &x2);
    if (!st) st = product(dev, stream, x2, w, bias, act, out);
  }
  eng_tensor_release(bias);
  eng_tensor_release(x2);
  return st;
}
