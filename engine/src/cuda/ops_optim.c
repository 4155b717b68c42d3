/* adamw_, sum_squares and scale_ on CUDA: the list of tensors becomes the table of the
 * multi-tensor kernels (kernels/cuda/optim.h), one launch per ENG_KCUDA_MT_MAX tensors. */
#include <cuda_runtime.h>
#include <stdlib.h>

#include "cuda/cuda_internal.h"
#include "cuda/optim.h"
#include "ops/ops_internal.h"
#include "ops/optim.h"

static eng_status_t cuda_failed(const char *op, int rc) {
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)rc));
}

static eng_status_t table_new(const char *op, int n, eng_kcuda_mt_tensor_t **out) {
  *out = calloc((size_t)(n ? n : 1), sizeof **out);
  return *out ? ENG_OK : eng_error(ENG_ERR_OOM, "%s: out of memory for a table of %d tensors", op, n);
}

static void table_set(eng_kcuda_mt_tensor_t *e, eng_tensor_t *t) {
  e->ptr[0] = eng_tensor_data(t);
  e->n = eng_tensor_numel(t);
  e->dt = t->dtype;
  e->gdt = t->dtype;
}

eng_status_t eng_cuda_adamw(const eng_op_call_t *call) {
  int n = call->n_in / 4, dev = call->in[0]->storage->device.index;
  cudaStream_t stream;
  eng_kcuda_mt_tensor_t *ts = NULL;
  eng_status_t st = eng_cuda_stream_of(dev, &stream);
  if (!st) st = table_new("adamw_", n, &ts);
  if (st) return st;
  for (int i = 0; i < n; i++) {
    table_set(&ts[i], call->in[i]);
    ts[i].ptr[1] = eng_tensor_data(call->in[n + i]);
    ts[i].gdt = call->in[n + i]->dtype;
    ts[i].ptr[2] = eng_tensor_data(call->in[2 * n + i]);
    ts[i].ptr[3] = eng_tensor_data(call->in[3 * n + i]);
  }
  eng_k_adamw_t h;
  eng_adamw_coefs(&call->attrs, &h);
  int rc = eng_kcuda_adamw(ts, n, &h, stream);
  free(ts);
  return rc ? cuda_failed("adamw_", rc) : ENG_OK;
}

/* Non-contiguous inputs are read through contiguous copies (released by the caller). */
eng_status_t eng_cuda_sum_squares(const eng_op_call_t *call) {
  int n = call->n_in, dev = call->out[0]->storage->device.index;
  cudaStream_t stream;
  eng_kcuda_mt_tensor_t *ts = NULL;
  eng_tensor_t **c = calloc((size_t)n, sizeof *c);
  void *partials = NULL;
  eng_status_t st = c ? eng_cuda_stream_of(dev, &stream)
                      : eng_error(ENG_ERR_OOM, "sum_squares: out of memory for %d tensors", n);
  if (!st) st = table_new("sum_squares", n, &ts);
  for (int k = 0; !st && k < n; k++)
    if (!(st = eng_tensor_contiguous(call->in[k], &c[k]))) table_set(&ts[k], c[k]);
  int64_t np = st ? 0 : eng_kcuda_sum_squares_partials(ts, n);
  if (!st) st = eng_cuda_malloc(dev, sizeof(double) * (size_t)(np ? np : 1), (eng_stream_t)stream,
                                &partials);
  if (!st) {
    int rc = eng_kcuda_sum_squares(ts, n, partials, eng_tensor_data(call->out[0]),
                                   call->out[0]->dtype, stream);
    if (rc) st = cuda_failed("sum_squares", rc);
  }
  if (partials) eng_cuda_free(dev, partials); /* stream-ordered: safe while the kernels run */
  for (int k = 0; c && k < n; k++) eng_tensor_release(c[k]);
  free(c);
  free(ts);
  return st;
}

eng_status_t eng_cuda_scale(const eng_op_call_t *call) {
  int n = call->n_in - 1;
  const eng_tensor_t *s = call->in[n];
  int dev = s->storage->device.index;
  cudaStream_t stream;
  eng_kcuda_mt_tensor_t *ts = NULL;
  eng_status_t st = eng_cuda_stream_of(dev, &stream);
  if (!st) st = table_new("scale_", n, &ts);
  if (st) return st;
  for (int k = 0; k < n; k++) table_set(&ts[k], call->in[k]);
  int rc = eng_kcuda_scale(ts, n, eng_tensor_data(s), s->dtype, stream);
  free(ts);
  return rc ? cuda_failed("scale_", rc) : ENG_OK;
}
