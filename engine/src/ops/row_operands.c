/* Operand checks of the mixed-dtype row ops (see row_operands.h). */
#include "ops/row_operands.h"

#include <string.h>

#include "ops/op_common.h"

eng_status_t eng_check_row_operands(const eng_op_call_t *call, int xi, unsigned like_x,
                                    const char *const *roles) {
  const char *name = eng_call_name(call);
  const eng_tensor_t *x = call->in[xi];
  char xs[ENG_OP_SHAPE_BUF], ts[ENG_OP_SHAPE_BUF];
  eng_status_t st;
  if ((st = eng_need_float(name, x))) return st;
  if (x->ndim == 0)
    return eng_error(ENG_ERR_SHAPE, "%s: %s must have at least one dim, got a 0-d tensor", name,
                     roles[xi]);
  const int64_t d = x->shape[x->ndim - 1];
  for (int k = 0; k < call->n_in; k++) {
    const eng_tensor_t *t = call->in[k];
    if (!t || k == xi) continue;
    if (!eng_dtype_is_float(t->dtype))
      return eng_error(ENG_ERR_DTYPE, "%s: %s must have a floating dtype, got %s", name, roles[k],
                       eng_dtype_name(t->dtype));
    if (like_x & (1u << k)) {
      if (!eng_shape_equal(t, x))
        return eng_error(ENG_ERR_SHAPE, "%s: %s has shape %s but %s has %s", name, roles[k],
                         ENG_SHAPE_STR(t, ts), roles[xi], ENG_SHAPE_STR(x, xs));
    } else if (t->ndim != 1 || t->shape[0] != d) {
      return eng_error(ENG_ERR_SHAPE, "%s: %s has shape %s but the last dim of %s %s is %lld", name,
                       roles[k], ENG_SHAPE_STR(t, ts), roles[xi], ENG_SHAPE_STR(x, xs),
                       (long long)d);
    }
  }
  return ENG_OK;
}

void eng_row_param_meta(eng_op_call_t *call, int k, const eng_tensor_t *t) {
  eng_op_meta_t *m = &call->meta[k];
  m->ndim = t->ndim;
  memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  m->dtype = t->dtype;
}
