/* cross_entropy(logits [..., C], integer targets [...]): the mean over the targets that are not
 * ignore_index of logsumexp(logits row) - logits[target]. Like torch, all-ignored (or no rows)
 * gives NaN (0 / 0). f16/bf16 logits are computed in double like the rest and give an f32 loss;
 * f32/f64 logits give their own dtype. */
#include "cpu/block_io.h"
#include "cpu/loss.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

static int is_int(eng_dtype_t dt) { return dt == ENG_I32 || dt == ENG_I64 || dt == ENG_U8; }

eng_status_t eng_infer_cross_entropy(eng_op_call_t *call) {
  eng_status_t st = eng_call_need_inputs(call, 2);
  if (st) return st;
  const eng_tensor_t *x = call->in[0], *t = call->in[1];
  char xs[ENG_OP_SHAPE_BUF], ts[ENG_OP_SHAPE_BUF], want[ENG_OP_SHAPE_BUF];
  if ((st = eng_need_float("cross_entropy", x))) return st;
  if (x->ndim == 0)
    return eng_error(ENG_ERR_SHAPE,
                     "cross_entropy: logits must have a class dim, got a 0-d tensor");
  if (!is_int(t->dtype))
    return eng_error(ENG_ERR_DTYPE, "cross_entropy: targets must have an integer dtype, got %s",
                     eng_dtype_name(t->dtype));
  int match = t->ndim == x->ndim - 1;
  for (int d = 0; match && d < t->ndim; d++) match = t->shape[d] == x->shape[d];
  if (!match)
    return eng_error(ENG_ERR_SHAPE, "cross_entropy: targets have shape %s but logits %s need %s",
                     ENG_SHAPE_STR(t, ts), ENG_SHAPE_STR(x, xs),
                     eng_shape_str(x->shape, x->ndim - 1, want, sizeof want));
  eng_op_meta_t *m = &call->meta[0];
  m->ndim = 0;
  m->dtype = x->dtype == ENG_F64 ? ENG_F64 : ENG_F32;
  return ENG_OK;
}

eng_status_t eng_cpu_cross_entropy(const eng_op_call_t *call) {
  eng_status_t st;
  eng_tensor_t *x = NULL, *t64 = NULL, *t = NULL;
  const int64_t ignore = call->attrs.i[0];
  st = eng_tensor_contiguous(call->in[0], &x);
  if (!st) st = eng_tensor_to_dtype(call->in[1], ENG_I64, &t64);
  if (!st) st = eng_tensor_contiguous(t64, &t);
  if (st) goto done;
  const int64_t c = x->shape[x->ndim - 1], rows = eng_tensor_numel(t);
  const int64_t *target = eng_tensor_data(t);
  for (int64_t r = 0; r < rows; r++) {
    if (target[r] != ignore && (target[r] < 0 || target[r] >= c)) {
      st = eng_error(ENG_ERR_INDEX,
                     "cross_entropy: target %lld (at %lld) is out of range for %lld classes",
                     (long long)target[r], (long long)r, (long long)c);
      goto done;
    }
  }
  int64_t count;
  double sum =
      eng_kcpu_cross_entropy_sum(x->dtype, eng_tensor_data(x), target, rows, c, ignore, &count);
  double loss = sum / (double)count; /* NaN when every target is ignored, like torch */
  eng_kcpu_store_f64(eng_tensor_data(call->out[0]), call->out[0]->dtype, 0, 1, &loss, 1);
done:
  eng_tensor_release(x);
  eng_tensor_release(t64);
  eng_tensor_release(t);
  return st;
}

eng_status_t eng_op_cross_entropy(eng_tensor_t *logits, eng_tensor_t *targets, int64_t ignore_index,
                                  eng_tensor_t **out) {
  eng_tensor_t *in[2] = {logits, targets};
  eng_op_call_t call = {.id = ENG_OP_CROSS_ENTROPY, .n_in = 2, .in = in};
  call.attrs.i[0] = ignore_index;
  call.attrs.ni = 1;
  return eng_call_run(&call, out);
}
