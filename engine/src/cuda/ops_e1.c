/* e1 and e1_backward on CUDA: contiguous inputs, the persistent kernels of kernels/cuda/e1.cu on
 * the current stream, and for the backward the weight gradients: dW_h = dxw^T h_prev over all
 * B*T steps (eng_es_cuda_prev_weight_grad) and db = sum of dxw. */
#include <cuda_runtime.h>

#include "cuda/blaslt.h"
#include "cuda/cuda_internal.h"
#include "cuda/e1.h"
#include "eng_ops.h"
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

/* Flat, rows r >= 1 of g pair with rows r - 1 of hs except at the B rows t = 0, so
 *   dW = g[1:]^T hs[:-1] - sum_{b >= 1} g[b,0]^T hs[b-1,T-1] + sum_b g[b,0]^T h0[b]:
 * one GEMM over B T - 1 rows and two over B - 1 and B rows read in place (row stride T d), summed
 * in f32 (16-bit dtypes: into an f32 [d,d], then rounded once into dW, as one GEMM over h_prev
 * would). The copy of hs a step back this replaces moved 67 MB at B = 64 T = 512 d = 512 (~20 us,
 * docs/PERF.md session 37). At T = 1 every row is a t = 0 row: dW = g^T h0. */
eng_status_t eng_es_cuda_prev_weight_grad(const eng_tensor_t *g, const eng_tensor_t *hs,
                                          const eng_tensor_t *h0, eng_tensor_t *dW) {
  const int dev = dW->storage->device.index;
  const int64_t B = g->shape[0], T = g->shape[1], d = g->shape[2];
  const size_t es = eng_dtype_size(g->dtype);
  const int wide = es == 2; /* the sum in f32, rounded once */
  const char *gp = eng_tensor_data(g), *hp = eng_tensor_data(hs);
  eng_tensor_t *sum = NULL;
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(dev, &stream);
  if (!st && wide) st = eng_tensor_empty(dW->shape, 2, ENG_F32, dW->storage->device, &sum);
  if (st) return st;
  const eng_blaslt_gemm_t base = {.dtype = g->dtype, .m = d, .n = d, .batch = 1, .c_f32 = wide,
                                  .c = eng_tensor_data(wide ? sum : dW), .act = ENG_ACT_NONE};
  /* the parts: dW (+)= (-) a^T b over k rows, a's and b's rows lda and ldb elements apart */
  const void *a[3] = {gp, gp + (size_t)(T * d) * es, gp + (size_t)d * es};
  const void *b[3] = {h0 ? eng_tensor_data(h0) : NULL, hp + (size_t)((T - 1) * d) * es, hp};
  const int64_t k[3] = {h0 ? B : 0, T > 1 ? B - 1 : 0, T > 1 ? B * T - 1 : 0};
  const int64_t lda[3] = {T * d, T * d, d}, ldb[3] = {d, T * d, d};
  int wrote = 0;
  for (int i = 0; !st && i < 3; i++) {
    if (k[i] <= 0) continue;
    eng_blaslt_gemm_t part = base;
    part.k = k[i];
    part.a = (eng_blaslt_operand_t){.data = a[i], .trans = 1, .ld = lda[i]};
    part.b = (eng_blaslt_operand_t){.data = b[i], .trans = 0, .ld = ldb[i]};
    part.negate = i == 1;
    part.accumulate = wrote;
    st = eng_blaslt_gemm(dev, (eng_stream_t)stream, &part);
    wrote = 1;
  }
  if (!st && !wrote) { /* T = 1 without h0: h_prev is zero */
    cudaError_t err = cudaMemsetAsync(eng_tensor_data(dW), 0, eng_tensor_nbytes(dW), stream);
    if (err) st = eng_cuda_error(err, "cudaMemsetAsync (dW_h)");
  } else if (!st && wide) {
    st = eng_tensor_copy_(dW, sum);
  }
  eng_tensor_release(sum);
  return st;
}

eng_status_t eng_cuda_e1_backward(const eng_op_call_t *call) {
  const char *op = eng_call_name(call);
  eng_tensor_t *c[6] = {NULL};
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
  if (!st) st = eng_es_cuda_prev_weight_grad(call->out[0], c[3], c[2], call->out[2]);
  if (!st) st = eng_es_cuda_bias_grad(call->out[0], call->out[3]);
  for (int k = 0; k < 6; k++) eng_tensor_release(c[k]);
  return st;
}
