/* cross_entropy on CUDA: contiguous (device) copies where needed, then kernels/cuda/loss.cu on the
 * current stream; the targets are read in their own integer dtype.
 *
 * Targets: outside graph capture, the launcher's record of the first out-of-range target comes
 * back in one 16-byte read (a synchronisation, affordable for a loss), so a bad target is the same
 * ENG_ERR_INDEX, with the same message, as on the CPU. While a graph is being captured nothing may
 * synchronise: the read is skipped, and a bad target makes the loss NaN, so it is never silent. */
#include <cuda_runtime.h>

#include "cuda/cuda_internal.h"
#include "cuda/loss.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

static eng_status_t cuda_failed(const char *op, int rc) {
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)rc));
}

/* Runs the loss of contiguous x and t into y, then (outside capture) reads back the bad-target
 * record. */
static eng_status_t run(int dev, cudaStream_t stream, const eng_tensor_t *x, const eng_tensor_t *t,
                        eng_tensor_t *y, int64_t ignore_index) {
  const int64_t c = x->shape[x->ndim - 1], rows = eng_tensor_numel(t);
  void *ws = NULL;
  eng_status_t st = eng_cuda_malloc(dev, eng_kcuda_cross_entropy_workspace(x->dtype, rows),
                                    (eng_stream_t)stream, &ws);
  if (st) return st;
  int rc = eng_kcuda_cross_entropy(x->dtype, eng_tensor_data(x), t->dtype, eng_tensor_data(t),
                                   eng_tensor_data(y), rows, c, ignore_index, ws, stream);
  int64_t bad[2] = {-1, 0}; /* the first row with a bad target (or -1), and its target */
  if (rc)
    st = cuda_failed("cross_entropy", rc);
  else if (!eng_cuda_is_capturing(dev))
    st = eng_cuda_copy_d2h(dev, bad, ws, sizeof bad, (eng_stream_t)stream);
  eng_cuda_free(dev, ws);
  if (!st && bad[0] >= 0)
    st = eng_error(ENG_ERR_INDEX,
                   "cross_entropy: target %lld (at %lld) is out of range for %lld classes",
                   (long long)bad[1], (long long)bad[0], (long long)c);
  return st;
}

eng_status_t eng_cuda_cross_entropy(const eng_op_call_t *call) {
  eng_tensor_t *y = call->out[0], *x = NULL, *t = NULL;
  const int dev = y->storage->device.index;
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(dev, &stream);
  if (!st) st = eng_tensor_contiguous(call->in[0], &x);
  if (!st) st = eng_tensor_contiguous(call->in[1], &t);
  if (!st) st = run(dev, stream, x, t, y, call->attrs.i[0]);
  eng_tensor_release(x);
  eng_tensor_release(t);
  return st;
}
