/* cat on CUDA: each piece is copied (with its dtype converted) into its slice of the output by the
 * copy op, so the strided CUDA copy kernel does the work. */
#include "ops/ops_internal.h"

eng_status_t eng_cuda_cat(const eng_op_call_t *call) {
  eng_tensor_t *out = call->out[0];
  int64_t dim = call->attrs.i[0], at = 0;
  for (int k = 0; k < call->n_in; k++) {
    const eng_tensor_t *t = call->in[k];
    if (eng_tensor_numel(t) == 0) continue;
    eng_tensor_t *slice = NULL;
    eng_status_t st = eng_tensor_narrow(out, dim, at, t->shape[dim], &slice);
    if (!st) st = eng_tensor_copy_(slice, t);
    eng_tensor_release(slice);
    if (st) return st;
    at += t->shape[dim];
  }
  return ENG_OK;
}
