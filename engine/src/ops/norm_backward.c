/* softmax_backward, rms_norm_backward and layer_norm_backward: shape/dtype rules, CPU adapters
 * onto kernels/cpu/norm_backward (on contiguous copies), typed functions. The norm backwards let
 * every operand have its own floating dtype (a bf16 gradient against an f32 residual stream):
 * gx takes x's dtype, gw w's and gb b's. */
#include <stdlib.h>

#include "cpu/norm_backward.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"
#include "ops/row_operands.h"

/* ---- softmax_backward (in: gy, y; attrs: i[0] the normalised dim, i[1] log) ---- */

eng_status_t eng_infer_softmax_backward(eng_op_call_t *call) {
  eng_status_t st = eng_call_need_inputs(call, 2);
  if (st) return st;
  const eng_tensor_t *gy = call->in[0], *y = call->in[1];
  const char *name = eng_call_name(call);
  char gs[ENG_OP_SHAPE_BUF], ys[ENG_OP_SHAPE_BUF];
  if ((st = eng_need_float(name, y))) return st;
  if (gy->dtype != y->dtype)
    return eng_error(ENG_ERR_DTYPE, "%s: gy has dtype %s but y has %s", name,
                     eng_dtype_name(gy->dtype), eng_dtype_name(y->dtype));
  if (!eng_shape_equal(gy, y))
    return eng_error(ENG_ERR_SHAPE, "%s: gy has shape %s but y has %s", name, ENG_SHAPE_STR(gy, gs),
                     ENG_SHAPE_STR(y, ys));
  int64_t dim = call->attrs.i[0];
  if (dim < 0 || dim >= (y->ndim > 0 ? y->ndim : 1))
    return eng_error(ENG_ERR_INDEX, "%s: dim %lld is out of range for %d dims", name,
                     (long long)dim, y->ndim);
  eng_call_meta_like(call, y, y->dtype);
  return ENG_OK;
}

eng_status_t eng_cpu_softmax_backward(const eng_op_call_t *call) {
  eng_tensor_t *c[2];
  eng_status_t st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  int64_t outer, n, inner;
  const int dim = (int)call->attrs.i[0];
  eng_dims_split(c[1], dim, dim + 1, &outer, &n, &inner);
  eng_kcpu_softmax_backward(c[1]->dtype, call->attrs.i[1] != 0, eng_tensor_data(c[0]),
                            eng_tensor_data(c[1]), eng_tensor_data(call->out[0]), outer, n, inner);
  eng_tensor_release(c[0]);
  eng_tensor_release(c[1]);
  return ENG_OK;
}

eng_status_t eng_op_softmax_backward(eng_tensor_t *gy, eng_tensor_t *y, int64_t dim, int log,
                                     eng_tensor_t **gx) {
  const char *name = eng_op_def(ENG_OP_SOFTMAX_BACKWARD)->name;
  if (!y) return eng_error(ENG_ERR_ARG, "%s: input 2 (y) is missing", name);
  int d;
  eng_status_t st = eng_wrap_dim0(name, dim, y->ndim, &d);
  if (st) return st;
  eng_tensor_t *in[2] = {gy, y};
  eng_op_call_t call = {.id = ENG_OP_SOFTMAX_BACKWARD, .n_in = 2, .in = in};
  call.attrs.i[0] = d;
  call.attrs.i[1] = log != 0;
  call.attrs.ni = 2;
  return eng_call_run(&call, gx);
}

/* ---- rms_norm_backward (in: gy, x, w), layer_norm_backward (in: gy, x, w, b); f[0] eps ---- */

eng_status_t eng_infer_norm_backward(eng_op_call_t *call) {
  static const char *const roles[] = {"gy", "x", "weight", "bias"};
  eng_status_t st = eng_call_need_inputs(call, 2);
  if (!st) st = eng_check_row_operands(call, 1, 1u << 0, roles);
  if (st) return st;
  const eng_tensor_t *x = call->in[1];
  int n = 0;
  eng_call_meta_like(call, x, x->dtype); /* gx */
  n++;
  for (int k = 2; k < call->n_in; k++) /* gw, gb: shaped like w and b, in their dtypes */
    if (call->in[k]) eng_row_param_meta(call, n++, call->in[k]);
  call->n_out = n;
  return ENG_OK;
}

/* Runs the CPU kernel of rms_norm_backward or layer_norm_backward on contiguous inputs. */
static eng_status_t cpu_norm_backward(const eng_op_call_t *call) {
  eng_tensor_t *c[4] = {NULL, NULL, NULL, NULL};
  eng_status_t st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  const eng_tensor_t *x = c[1];
  const int64_t d = x->shape[x->ndim - 1], rows = d ? eng_tensor_numel(x) / d : 0;
  const int layer = call->id == ENG_OP_LAYER_NORM_BACKWARD;
  double *scratch = malloc(sizeof(double) * (size_t)(2 * rows + 1));
  if (!scratch) {
    st = eng_error(ENG_ERR_OOM, "%s: out of memory for %lld row statistics", eng_call_name(call),
                   (long long)rows);
    goto done;
  }
  eng_kcpu_arg_t gy = eng_kcpu_arg(c[0]), xa = eng_kcpu_arg(c[1]), w = eng_kcpu_arg(c[2]);
  eng_tensor_t *gw = c[2] ? call->out[1] : NULL;
  eng_tensor_t *gb = layer && c[3] ? call->out[c[2] ? 2 : 1] : NULL;
  if (rows > 0 && d > 0) {
    if (layer)
      eng_kcpu_layer_norm_backward(gy, xa, w, call->attrs.f[0], eng_tensor_data(call->out[0]),
                                   gw ? eng_tensor_data(gw) : NULL, gw ? gw->dtype : ENG_F32,
                                   gb ? eng_tensor_data(gb) : NULL, gb ? gb->dtype : ENG_F32,
                                   scratch, rows, d);
    else
      eng_kcpu_rms_norm_backward(gy, xa, w, call->attrs.f[0], eng_tensor_data(call->out[0]),
                                 gw ? eng_tensor_data(gw) : NULL, gw ? gw->dtype : ENG_F32, scratch,
                                 rows, d);
  } else {
    /* no rows: the parameter gradients are sums of nothing */
    if (gw && (st = eng_tensor_fill_(gw, 0))) goto done;
    if (gb && (st = eng_tensor_fill_(gb, 0))) goto done;
  }
done:
  free(scratch);
  for (int k = 0; k < 4; k++) eng_tensor_release(c[k]);
  return st;
}

eng_status_t eng_cpu_rms_norm_backward(const eng_op_call_t *call) { return cpu_norm_backward(call); }

eng_status_t eng_cpu_layer_norm_backward(const eng_op_call_t *call) {
  return cpu_norm_backward(call);
}

/* Hands the call's outputs to the caller's slots in order, skipping the NULL slots' tensors. */
static void hand_out(eng_op_call_t *call, eng_tensor_t **const *slots, int n) {
  for (int k = 0; k < n; k++) {
    if (slots[k])
      *slots[k] = call->out[k];
    else
      eng_tensor_release(call->out[k]);
  }
}

eng_status_t eng_op_rms_norm_backward(eng_tensor_t *gy, eng_tensor_t *x, eng_tensor_t *w, double eps,
                                      eng_tensor_t **gx, eng_tensor_t **gw) {
  eng_tensor_t *in[3] = {gy, x, w};
  eng_op_call_t call = {.id = ENG_OP_RMS_NORM_BACKWARD, .n_in = 3, .in = in};
  call.attrs.f[0] = eps;
  if (gw) *gw = NULL;
  eng_status_t st = eng_op_dispatch(&call);
  if (st) return st;
  eng_tensor_t **const slots[2] = {gx, gw};
  hand_out(&call, slots, call.n_out);
  return ENG_OK;
}

eng_status_t eng_op_layer_norm_backward(eng_tensor_t *gy, eng_tensor_t *x, eng_tensor_t *w,
                                        eng_tensor_t *b, double eps, eng_tensor_t **gx,
                                        eng_tensor_t **gw, eng_tensor_t **gb) {
  eng_tensor_t *in[4] = {gy, x, w, b};
  eng_op_call_t call = {.id = ENG_OP_LAYER_NORM_BACKWARD, .n_in = 4, .in = in};
  call.attrs.f[0] = eps;
  if (gw) *gw = NULL;
  if (gb) *gb = NULL;
  eng_status_t st = eng_op_dispatch(&call);
  if (st) return st;
  eng_tensor_t **const slots[3] = {gx, w ? gw : gb, gb};
  hand_out(&call, slots, call.n_out);
  return ENG_OK;
}
