/* cross_entropy_backward(logits [..., C], integer targets [...], gloss): the gradient of the mean
 * cross-entropy (engine/src/ops/loss.c) times the upstream gradient gloss, a one-element tensor on
 * the logits' device that the kernels read where it lies (so a CUDA graph can capture the op):
 * (softmax(logits) - onehot(target)) * gloss / n_valid, 0 on rows whose target is ignore_index,
 * in the logits' dtype. */
#include "cpu/norm_backward.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

eng_status_t eng_infer_cross_entropy_backward(eng_op_call_t *call) {
  eng_status_t st = eng_call_need_inputs(call, 3);
  if (st) return st;
  const eng_tensor_t *x = call->in[0], *t = call->in[1], *g = call->in[2];
  const char *name = eng_call_name(call);
  char xs[ENG_OP_SHAPE_BUF], ts[ENG_OP_SHAPE_BUF], want[ENG_OP_SHAPE_BUF];
  if ((st = eng_need_float(name, x))) return st;
  if (x->ndim == 0)
    return eng_error(ENG_ERR_SHAPE, "%s: logits must have a class dim, got a 0-d tensor", name);
  if (t->dtype != ENG_I32 && t->dtype != ENG_I64 && t->dtype != ENG_U8)
    return eng_error(ENG_ERR_DTYPE, "%s: targets must have an integer dtype, got %s", name,
                     eng_dtype_name(t->dtype));
  int match = t->ndim == x->ndim - 1;
  for (int d = 0; match && d < t->ndim; d++) match = t->shape[d] == x->shape[d];
  if (!match)
    return eng_error(ENG_ERR_SHAPE, "%s: targets have shape %s but logits %s need %s", name,
                     ENG_SHAPE_STR(t, ts), ENG_SHAPE_STR(x, xs),
                     eng_shape_str(x->shape, x->ndim - 1, want, sizeof want));
  if (!eng_dtype_is_float(g->dtype) || eng_tensor_numel(g) != 1)
    return eng_error(ENG_ERR_SHAPE, "%s: gloss must be a one-element floating tensor, got %s %s",
                     name, eng_dtype_name(g->dtype), ENG_SHAPE_STR(g, ts));
  eng_call_meta_like(call, x, x->dtype);
  return ENG_OK;
}

eng_status_t eng_cpu_cross_entropy_backward(const eng_op_call_t *call) {
  eng_tensor_t *x = NULL, *t64 = NULL, *t = NULL;
  const int64_t ignore = call->attrs.i[0];
  eng_status_t st = eng_tensor_contiguous(call->in[0], &x);
  if (!st) st = eng_tensor_to_dtype(call->in[1], ENG_I64, &t64);
  if (!st) st = eng_tensor_contiguous(t64, &t);
  if (st) goto done;
  const int64_t c = x->shape[x->ndim - 1], rows = eng_tensor_numel(t);
  const int64_t *target = eng_tensor_data(t);
  for (int64_t r = 0; r < rows; r++) {
    if (target[r] != ignore && (target[r] < 0 || target[r] >= c)) {
      st = eng_error(ENG_ERR_INDEX, "%s: target %lld (at %lld) is out of range for %lld classes",
                     eng_call_name(call), (long long)target[r], (long long)r, (long long)c);
      goto done;
    }
  }
  const eng_tensor_t *g = call->in[2];
  eng_kcpu_cross_entropy_backward(x->dtype, eng_tensor_data(x), target,
                                  eng_load_f64(eng_tensor_data(g), g->dtype, 0),
                                  eng_tensor_data(call->out[0]), rows, c, ignore);
done:
  eng_tensor_release(x);
  eng_tensor_release(t64);
  eng_tensor_release(t);
  return st;
}

eng_status_t eng_op_cross_entropy_backward(eng_tensor_t *logits, eng_tensor_t *targets,
                                           eng_tensor_t *gloss, int64_t ignore_index,
                                           eng_tensor_t **glogits) {
  eng_tensor_t *in[3] = {logits, targets, gloss};
  eng_op_call_t call = {.id = ENG_OP_CROSS_ENTROPY_BACKWARD, .n_in = 3, .in = in};
  call.attrs.i[0] = ignore_index;
  call.attrs.ni = 1;
  return eng_call_run(&call, glogits);
}
