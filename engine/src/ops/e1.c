/* E1, the gated Elman recurrence: the e1 and e1_backward ops (shape rules, CPU adapters onto
 * kernels/cpu/e1, typed functions), and the helpers of e_series.h that E23 shares. */
#include <stdlib.h>
#include <string.h>

#include "cpu/e1.h"
#include "eng_ops.h"
#include "ops/e_series.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

/* ---- shared helpers (e_series.h) ---- */

eng_status_t eng_es_need(const char *op, const char *role, const eng_tensor_t *t, eng_dtype_t dt,
                         int nd, const int64_t *shape) {
  char got[ENG_OP_SHAPE_BUF], want[ENG_OP_SHAPE_BUF];
  if (t->dtype != dt)
    return eng_error(ENG_ERR_DTYPE, "%s: %s has dtype %s but must be %s like the other values", op,
                     role, eng_dtype_name(t->dtype), eng_dtype_name(dt));
  int same = t->ndim == nd;
  for (int k = 0; same && k < nd; k++) same = t->shape[k] == shape[k];
  if (!same)
    return eng_error(ENG_ERR_SHAPE, "%s: %s has shape %s but must be %s", op, role,
                     ENG_SHAPE_STR(t, got), eng_shape_str(shape, nd, want, sizeof want));
  return ENG_OK;
}

eng_status_t eng_es_seq(const char *op, const char *role, const eng_tensor_t *x, int64_t *B,
                        int64_t *T, int64_t *d) {
  char s[ENG_OP_SHAPE_BUF];
  eng_status_t st = eng_need_float(op, x);
  if (st) return st;
  if (x->ndim != 3 || x->shape[0] < 1 || x->shape[1] < 1 || x->shape[2] < 1)
    return eng_error(ENG_ERR_SHAPE, "%s: %s must be [B,T,d] with B, T, d >= 1, got %s", op, role,
                     ENG_SHAPE_STR(x, s));
  *B = x->shape[0], *T = x->shape[1], *d = x->shape[2];
  return ENG_OK;
}

void eng_es_meta(eng_op_call_t *call, int k, eng_dtype_t dt, int nd, const int64_t *shape) {
  call->meta[k].ndim = nd;
  call->meta[k].dtype = dt;
  memcpy(call->meta[k].shape, shape, sizeof(int64_t) * (size_t)nd);
}

eng_dtype_t eng_es_state_dtype(eng_dtype_t values) { return values == ENG_F64 ? ENG_F64 : ENG_F32; }

eng_status_t eng_es_f64(eng_tensor_t *t, eng_tensor_t **out) {
  *out = NULL;
  if (!t) return ENG_OK;
  eng_tensor_t *c = NULL;
  eng_status_t st = eng_tensor_to_dtype(t, ENG_F64, &c);
  if (st) return st;
  st = eng_tensor_contiguous(c, out);
  eng_tensor_release(c);
  return st;
}

eng_status_t eng_es_store(eng_tensor_t *out, double *v) {
  eng_tensor_t *w = NULL;
  eng_status_t st = eng_tensor_wrap(v, ENG_F64, out->shape, out->ndim, NULL, ENG_CPU_DEVICE, &w);
  if (st) return st;
  st = eng_tensor_copy_(out, w);
  eng_tensor_release(w);
  return st;
}

eng_status_t eng_es_run(eng_op_call_t *call, eng_tensor_t **const *outs, int n) {
  for (int k = 0; k < n; k++)
    if (outs[k]) *outs[k] = NULL;
  eng_status_t st = eng_op_dispatch(call);
  if (st) return st;
  for (int k = 0; k < call->n_out; k++) {
    if (k < n && outs[k])
      *outs[k] = call->out[k];
    else
      eng_tensor_release(call->out[k]);
  }
  return ENG_OK;
}

eng_status_t eng_es_stage(const eng_op_call_t *call, eng_tensor_t **c) {
  for (int k = 0; k < call->n_in; k++) c[k] = NULL;
  for (int k = 0; k < call->n_in; k++) {
    eng_status_t st = eng_es_f64(call->in[k], &c[k]);
    if (st) {
      for (int j = 0; j < k; j++) eng_tensor_release(c[j]);
      return st;
    }
  }
  return ENG_OK;
}

const double *eng_es_data(const eng_tensor_t *t) {
  return t ? (const double *)eng_tensor_data(t) : NULL;
}

eng_status_t eng_es_alloc(const eng_op_call_t *call, double **buf) {
  for (int k = 0; k < call->n_out; k++) {
    int64_t n = eng_tensor_numel(call->out[k]);
    buf[k] = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!buf[k]) {
      for (int j = 0; j < k; j++) free(buf[j]);
      return eng_error(ENG_ERR_OOM, "%s: out of host memory", eng_call_name(call));
    }
  }
  return ENG_OK;
}

void eng_es_release(const eng_op_call_t *call, eng_tensor_t **c) {
  for (int k = 0; k < call->n_in; k++) eng_tensor_release(c[k]);
}

eng_status_t eng_es_finish(const eng_op_call_t *call, eng_tensor_t **c, double **buf) {
  eng_status_t st = ENG_OK;
  for (int k = 0; k < call->n_out; k++) {
    if (!st) st = eng_es_store(call->out[k], buf[k]);
    free(buf[k]);
  }
  eng_es_release(call, c);
  return st;
}

/* ---- e1: in xw, z, W_h, b, h0 (optional); out y, h_T, hs ---- */

eng_status_t eng_infer_e1(eng_op_call_t *call) {
  const char *op = eng_call_name(call);
  eng_status_t st = eng_call_need_inputs(call, 4);
  if (st) return st;
  int64_t B, T, d;
  if ((st = eng_es_seq(op, "xw", call->in[0], &B, &T, &d))) return st;
  const eng_dtype_t dt = call->in[0]->dtype;
  const int64_t seq[3] = {B, T, d}, sq[2] = {d, d}, row[2] = {B, d};
  if ((st = eng_es_need(op, "z", call->in[1], dt, 3, seq))) return st;
  if ((st = eng_es_need(op, "W_h", call->in[2], dt, 2, sq))) return st;
  if ((st = eng_es_need(op, "b", call->in[3], dt, 1, &d))) return st;
  if (call->in[4] && (st = eng_es_need(op, "h0", call->in[4], dt, 2, row))) return st;
  call->n_out = 3;
  eng_es_meta(call, 0, dt, 3, seq);
  eng_es_meta(call, 1, dt, 2, row);
  eng_es_meta(call, 2, dt, 3, seq);
  return ENG_OK;
}

eng_status_t eng_cpu_e1(const eng_op_call_t *call) {
  eng_tensor_t *c[5];
  double *o[3];
  eng_status_t st = eng_es_stage(call, c);
  if (st) return st;
  if ((st = eng_es_alloc(call, o))) return eng_es_release(call, c), st;
  const int64_t *s = call->in[0]->shape;
  eng_kcpu_e1_forward(s[0], s[1], s[2], eng_es_data(c[0]), eng_es_data(c[1]), eng_es_data(c[2]),
                      eng_es_data(c[3]), eng_es_data(c[4]), o[0], o[1], o[2]);
  return eng_es_finish(call, c, o);
}

/* ---- e1_backward: in z, W_h, h0 (optional), hs, dy, dh_T (optional);
 *      out dxw, dz, dW_h, db, dh0 ---- */

eng_status_t eng_infer_e1_backward(eng_op_call_t *call) {
  const char *op = eng_call_name(call);
  eng_status_t st;
  for (int k = 0; k < 6; k++)
    if (!call->in[k] && k != 2 && k != 5)
      return eng_error(ENG_ERR_ARG, "%s: input %d is missing", op, k + 1);
  int64_t B, T, d;
  if ((st = eng_es_seq(op, "z", call->in[0], &B, &T, &d))) return st;
  const eng_dtype_t dt = call->in[0]->dtype;
  const int64_t seq[3] = {B, T, d}, sq[2] = {d, d}, row[2] = {B, d};
  if ((st = eng_es_need(op, "W_h", call->in[1], dt, 2, sq))) return st;
  if (call->in[2] && (st = eng_es_need(op, "h0", call->in[2], dt, 2, row))) return st;
  if ((st = eng_es_need(op, "hs", call->in[3], dt, 3, seq))) return st;
  if ((st = eng_es_need(op, "dy", call->in[4], dt, 3, seq))) return st;
  if (call->in[5] && (st = eng_es_need(op, "dh_T", call->in[5], dt, 2, row))) return st;
  call->n_out = 5;
  eng_es_meta(call, 0, dt, 3, seq);
  eng_es_meta(call, 1, dt, 3, seq);
  eng_es_meta(call, 2, dt, 2, sq);
  eng_es_meta(call, 3, dt, 1, &d);
  eng_es_meta(call, 4, dt, 2, row);
  return ENG_OK;
}

eng_status_t eng_cpu_e1_backward(const eng_op_call_t *call) {
  eng_tensor_t *c[6];
  double *o[5];
  eng_status_t st = eng_es_stage(call, c);
  if (st) return st;
  if ((st = eng_es_alloc(call, o))) return eng_es_release(call, c), st;
  const int64_t *s = call->in[0]->shape;
  eng_kcpu_e1_backward(s[0], s[1], s[2], eng_es_data(c[0]), eng_es_data(c[1]), eng_es_data(c[2]),
                       eng_es_data(c[3]), eng_es_data(c[4]), eng_es_data(c[5]), o[0], o[1], o[2],
                       o[3], o[4]);
  return eng_es_finish(call, c, o);
}

/* ---- typed functions ---- */

eng_status_t eng_op_e1(eng_tensor_t *xw, eng_tensor_t *z, eng_tensor_t *W_h, eng_tensor_t *b,
                       eng_tensor_t *h0, eng_tensor_t **y, eng_tensor_t **h_T, eng_tensor_t **hs) {
  eng_tensor_t *in[5] = {xw, z, W_h, b, h0};
  eng_op_call_t call = {.id = ENG_OP_E1, .n_in = 5, .in = in};
  return eng_es_run(&call, (eng_tensor_t * *const[]){y, h_T, hs}, 3);
}

eng_status_t eng_op_e1_backward(eng_tensor_t *z, eng_tensor_t *W_h, eng_tensor_t *h0,
                                eng_tensor_t *hs, eng_tensor_t *dy, eng_tensor_t *dh_T,
                                eng_tensor_t **dxw, eng_tensor_t **dz, eng_tensor_t **dW_h,
                                eng_tensor_t **db, eng_tensor_t **dh0) {
  eng_tensor_t *in[6] = {z, W_h, h0, hs, dy, dh_T};
  eng_op_call_t call = {.id = ENG_OP_E1_BACKWARD, .n_in = 6, .in = in};
  return eng_es_run(&call, (eng_tensor_t * *const[]){dxw, dz, dW_h, db, dh0}, 5);
}
