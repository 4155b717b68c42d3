/* add_rms_norm(x, residual, w): the pre-norm entry of a residual block. residual_out = residual + x
 * is kept in f32 (f64 when x or residual is f64), the residual stream's dtype, and
 * y = rms_norm(residual_out, w) comes out in x's dtype (the activations'), from the stored
 * residual_out, as the backward sees it. residual may be NULL (residual_out = x widened), and must
 * otherwise be f32, f64 or x's dtype; w (any floating dtype, [d]) may be NULL. */
#include "cpu/norm_backward.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"
#include "ops/row_operands.h"

/* The dtype of residual_out. */
static eng_dtype_t stream_dtype(const eng_tensor_t *x, const eng_tensor_t *residual) {
  return x->dtype == ENG_F64 || (residual && residual->dtype == ENG_F64) ? ENG_F64 : ENG_F32;
}

eng_status_t eng_infer_add_rms_norm(eng_op_call_t *call) {
  static const char *const roles[] = {"x", "residual", "weight"};
  eng_status_t st = eng_call_need_inputs(call, 1);
  if (!st) st = eng_check_row_operands(call, 0, 1u << 1, roles);
  if (st) return st;
  const eng_tensor_t *x = call->in[0], *r = call->in[1];
  if (r && r->dtype != x->dtype && r->dtype != ENG_F32 && r->dtype != ENG_F64)
    return eng_error(ENG_ERR_DTYPE, "%s: residual must be f32, f64 or x's dtype %s, got %s",
                     eng_call_name(call), eng_dtype_name(x->dtype), eng_dtype_name(r->dtype));
  eng_call_meta_like(call, x, x->dtype);
  eng_row_param_meta(call, 1, x);
  call->meta[1].dtype = stream_dtype(x, r);
  call->n_out = 2;
  return ENG_OK;
}

eng_status_t eng_cpu_add_rms_norm(const eng_op_call_t *call) {
  eng_tensor_t *c[3] = {NULL, NULL, NULL};
  eng_status_t st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  const eng_tensor_t *x = c[0], *h = call->out[1];
  const int64_t d = x->shape[x->ndim - 1], rows = d ? eng_tensor_numel(x) / d : 0;
  eng_kcpu_add_rms_norm(eng_kcpu_arg(c[0]), eng_kcpu_arg(c[1]), eng_kcpu_arg(c[2]),
                        call->attrs.f[0], eng_tensor_data(call->out[0]), eng_tensor_data(h),
                        h->dtype, rows, d);
  for (int k = 0; k < 3; k++) eng_tensor_release(c[k]);
  return ENG_OK;
}

eng_status_t eng_op_add_rms_norm(eng_tensor_t *x, eng_tensor_t *residual, eng_tensor_t *w,
                                 double eps, eng_tensor_t **y, eng_tensor_t **residual_out) {
  eng_tensor_t *in[3] = {x, residual, w};
  eng_op_call_t call = {.id = ENG_OP_ADD_RMS_NORM, .n_in = 3, .in = in};
  call.attrs.f[0] = eps;
  eng_status_t st = eng_op_dispatch(&call);
  if (st) return st;
  *y = call.out[0];
  if (residual_out)
    *residual_out = call.out[1];
  else
    eng_tensor_release(call.out[1]);
  return ENG_OK;
}
