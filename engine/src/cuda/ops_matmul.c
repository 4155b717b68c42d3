/* matmul on CUDA: torch.matmul semantics (the shape rule is the CPU op's) through cuBLASLt. The
 * output is contiguous [batch..., m, n]; operands are read in place when cuBLASLt can (a transposed
 * view becomes a transpose flag, a broadcast operand batch stride 0) and copied otherwise. When the
 * right operand is shared by the whole batch and the left one's batches follow each other row after
 * row, the batch is one product with batch * m rows. */
#include <cuda_runtime.h>

#include "cuda/cuda_internal.h"
#include "cuda/gemm_operand.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

eng_status_t eng_cuda_matmul(const eng_op_call_t *call) {
  eng_tensor_t *a = call->in[0], *b = call->in[1], *out = call->out[0];
  int dev = out->storage->device.index;
  if (eng_tensor_numel(out) == 0) return ENG_OK;
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(dev, &stream);
  if (st) return st;
  /* out is [batch dims..., m (unless a is 1-D), n (unless b is 1-D)] */
  int nbatch = out->ndim - (a->ndim >= 2) - (b->ndim >= 2);
  eng_blaslt_gemm_t g = {.dtype = out->dtype, .c = eng_tensor_data(out), .act = ENG_ACT_NONE};
  g.m = a->ndim >= 2 ? a->shape[a->ndim - 2] : 1;
  g.k = a->shape[a->ndim - 1];
  g.n = b->ndim >= 2 ? b->shape[b->ndim - 1] : 1;
  g.batch = eng_dims_numel(out->shape, 0, nbatch);
  if (g.k == 0) { /* an empty sum: zeros (all-zero bits in every float dtype) */
    cudaError_t err = cudaMemsetAsync(g.c, 0, eng_tensor_nbytes(out), stream);
    return err ? eng_error(ENG_ERR_DEVICE, "matmul: CUDA error: %s", cudaGetErrorString(err)) : ENG_OK;
  }
  eng_tensor_t *hold_a = NULL, *hold_b = NULL;
  st = eng_gemm_operand(a, 0, nbatch, out->shape, &g.a, &hold_a);
  if (!st) st = eng_gemm_operand(b, 1, nbatch, out->shape, &g.b, &hold_b);
  if (!st) {
    if (g.batch > 1 && g.b.bstride == 0 && !g.a.trans && g.a.bstride == g.m * g.a.ld) {
      g.m *= g.batch;
      g.batch = 1;
    }
    st = eng_blaslt_gemm(dev, (eng_stream_t)stream, &g);
  }
  eng_tensor_release(hold_a);
  eng_tensor_release(hold_b);
  return st;
}
