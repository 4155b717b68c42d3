/* softmax / log_softmax along a dim, layer_norm and rms_norm over the last dim: shape/dtype
 * rules, CPU adapters onto kernels/cpu/norm (on contiguous copies), typed functions. */
#include "cpu/norm.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

/* ---- softmax, log_softmax (attrs: i[0] the normalised dim) ---- */

eng_status_t eng_infer_softmax(eng_op_call_t *call) {
  eng_status_t st = eng_call_need_inputs(call, 1);
  if (st) return st;
  const eng_tensor_t *x = call->in[0];
  const char *name = eng_call_name(call);
  if ((st = eng_need_float(name, x))) return st;
  int64_t dim = call->attrs.i[0];
  if (dim < 0 || dim >= (x->ndim > 0 ? x->ndim : 1))
    return eng_error(ENG_ERR_INDEX, "%s: dim %lld is out of range for %d dims", name,
                     (long long)dim, x->ndim);
  eng_call_meta_like(call, x, x->dtype);
  return ENG_OK;
}

eng_status_t eng_cpu_softmax(const eng_op_call_t *call) {
  eng_status_t st;
  eng_tensor_t *x = call->in[0], *xc = NULL;
  int64_t outer, n, inner;
  eng_dims_split(x, (int)call->attrs.i[0], (int)call->attrs.i[0] + 1, &outer, &n, &inner);
  st = eng_tensor_contiguous(x, &xc);
  if (st) return st;
  eng_kcpu_softmax(x->dtype, call->id == ENG_OP_LOG_SOFTMAX, eng_tensor_data(xc),
                   eng_tensor_data(call->out[0]), outer, n, inner);
  eng_tensor_release(xc);
  return ENG_OK;
}

static eng_status_t softmax_call(eng_op_id_t id, eng_tensor_t *x, int64_t dim, eng_tensor_t **out) {
  const char *name = eng_op_def(id)->name;
  if (!x) return eng_error(ENG_ERR_ARG, "%s: input 1 is missing", name);
  int d;
  eng_status_t st = eng_wrap_dim0(name, dim, x->ndim, &d);
  if (st) return st;
  eng_tensor_t *in[1] = {x};
  eng_op_call_t call = {.id = id, .n_in = 1, .in = in};
  call.attrs.i[0] = d;
  call.attrs.ni = 1;
  return eng_call_run(&call, out);
}

eng_status_t eng_op_softmax(eng_tensor_t *x, int64_t dim, eng_tensor_t **out) {
  return softmax_call(ENG_OP_SOFTMAX, x, dim, out);
}

eng_status_t eng_op_log_softmax(eng_tensor_t *x, int64_t dim, eng_tensor_t **out) {
  return softmax_call(ENG_OP_LOG_SOFTMAX, x, dim, out);
}

/* ---- layer_norm (x, weight, bias), rms_norm (x, weight); attrs: f[0] eps ---- */

eng_status_t eng_infer_norm(eng_op_call_t *call) {
  eng_status_t st = eng_call_need_inputs(call, 1);
  if (st) return st;
  const eng_tensor_t *x = call->in[0];
  const char *name = eng_call_name(call);
  char xs[ENG_OP_SHAPE_BUF], ts[ENG_OP_SHAPE_BUF];
  if ((st = eng_need_float(name, x))) return st;
  if (x->ndim == 0)
    return eng_error(ENG_ERR_SHAPE, "%s: x must have at least one dim, got a 0-d tensor", name);
  int64_t d = x->shape[x->ndim - 1];
  static const char *const roles[] = {"x", "weight", "bias"};
  for (int k = 1; k < call->n_in; k++) {
    const eng_tensor_t *t = call->in[k];
    if (!t) continue;
    if (t->dtype != x->dtype)
      return eng_error(ENG_ERR_DTYPE, "%s: %s has dtype %s but x has %s", name, roles[k],
                       eng_dtype_name(t->dtype), eng_dtype_name(x->dtype));
    if (t->ndim != 1 || t->shape[0] != d)
      return eng_error(ENG_ERR_SHAPE, "%s: %s has shape %s but the last dim of x %s is %lld", name,
                       roles[k], ENG_SHAPE_STR(t, ts), ENG_SHAPE_STR(x, xs), (long long)d);
  }
  eng_call_meta_like(call, x, x->dtype);
  return ENG_OK;
}


eng_status_t eng_cpu_layer_norm(const eng_op_call_t *call) {
  eng_status_t st;
  eng_tensor_t *c[3];
  st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  const eng_tensor_t *x = c[0];
  int64_t d = x->shape[x->ndim - 1], rows = d ? eng_tensor_numel(x) / d : 0;
  eng_kcpu_layer_norm(x->dtype, eng_tensor_data(x), eng_data_or_null(c[1]), eng_data_or_null(c[2]),
                      eng_tensor_data(call->out[0]), rows, d, call->attrs.f[0]);
  for (int k = 0; k < 3; k++) eng_tensor_release(c[k]);
  return ENG_OK;
}

eng_status_t eng_cpu_rms_norm(const eng_op_call_t *call) {
  eng_status_t st;
  eng_tensor_t *c[2];
  st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  const eng_tensor_t *x = c[0];
  int64_t d = x->shape[x->ndim - 1], rows = d ? eng_tensor_numel(x) / d : 0;
  eng_kcpu_rms_norm(x->dtype, eng_tensor_data(x), eng_data_or_null(c[1]), eng_tensor_data(call->out[0]),
                    rows, d, call->attrs.f[0]);
  for (int k = 0; k < 2; k++) eng_tensor_release(c[k]);
  return ENG_OK;
}

eng_status_t eng_op_layer_norm(eng_tensor_t *x, eng_tensor_t *weight, eng_tensor_t *bias,
                               double eps, eng_tensor_t **out) {
  eng_tensor_t *in[3] = {x, weight, bias};
  eng_op_call_t call = {.id = ENG_OP_LAYER_NORM, .n_in = 3, .in = in};
  call.attrs.f[0] = eps;
  return eng_call_run(&call, out);
}

eng_status_t eng_op_rms_norm(eng_tensor_t *x, eng_tensor_t *weight, double eps,
                             eng_tensor_t **out) {
  eng_tensor_t *in[2] = {x, weight};
  eng_op_call_t call = {.id = ENG_OP_RMS_NORM, .n_in = 2, .in = in};
  call.attrs.f[0] = eps;
  return eng_call_run(&call, out);
}
