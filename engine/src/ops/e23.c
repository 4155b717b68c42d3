/* E23, the dual-memory Elman recurrence: the e23 and e23_backward ops (shape rules, CPU adapters
 * onto kernels/cpu/e23, typed functions). */
#include "cpu/e23.h"
#include "eng_ops.h"
#include "ops/e_series.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

/* ---- e23: in xw, W_h, W_write, b, h0 (optional), tape0 (optional); attrs i[0] n_slots (0: from
 * tape0), i[1] checkpoint interval C; out hs, h_T, tape_T, ckpt [B, eng_e23_ckpt_len] (the state
 * dtype: per batch row the tape checkpoints, then the a, r and w trace; see cpu/e23.h) ---- */

eng_status_t eng_infer_e23(eng_op_call_t *call) {
  const char *op = eng_call_name(call);
  eng_status_t st = eng_call_need_inputs(call, 4);
  if (st) return st;
  int64_t B, T, d;
  if ((st = eng_es_seq(op, "xw", call->in[0], &B, &T, &d))) return st;
  const eng_dtype_t dt = call->in[0]->dtype;
  int64_t N = call->attrs.i[0], C = call->attrs.i[1];
  const eng_tensor_t *tape0 = call->in[5];
  if (N == 0 && tape0 && tape0->ndim == 3) N = tape0->shape[1];
  if (N < 1)
    return eng_error(ENG_ERR_ARG, "%s: n_slots must be >= 1 (or given by tape0), got %lld", op,
                     (long long)N);
  if (C < 1)
    return eng_error(ENG_ERR_ARG, "%s: the checkpoint interval must be >= 1, got %lld", op,
                     (long long)C);
  const int64_t seq[3] = {B, T, d}, sq[2] = {d, d}, row[2] = {B, d}, tape[3] = {B, N, d};
  const int64_t ck[2] = {B, eng_e23_ckpt_len(T, N, d, C)};
  if ((st = eng_es_need(op, "W_h", call->in[1], dt, 2, sq))) return st;
  if ((st = eng_es_need(op, "W_write", call->in[2], dt, 2, sq))) return st;
  if ((st = eng_es_need(op, "b", call->in[3], dt, 1, &d))) return st;
  if (call->in[4] && (st = eng_es_need(op, "h0", call->in[4], dt, 2, row))) return st;
  if (tape0 && (st = eng_es_need(op, "tape0", tape0, dt, 3, tape))) return st;
  call->n_out = 4;
  eng_es_meta(call, 0, dt, 3, seq);
  eng_es_meta(call, 1, dt, 2, row);
  eng_es_meta(call, 2, dt, 3, tape);
  eng_es_meta(call, 3, eng_es_state_dtype(dt), 2, ck);
  return ENG_OK;
}

eng_status_t eng_cpu_e23(const eng_op_call_t *call) {
  eng_tensor_t *c[6];
  double *o[4];
  eng_status_t st = eng_es_stage(call, c);
  if (st) return st;
  if ((st = eng_es_alloc(call, o))) return eng_es_release(call, c), st;
  const int64_t *s = call->in[0]->shape, N = call->out[2]->shape[1];
  eng_kcpu_e23_forward(s[0], s[1], N, s[2], call->attrs.i[1], eng_es_data(c[0]), eng_es_data(c[1]),
                       eng_es_data(c[2]), eng_es_data(c[3]), eng_es_data(c[4]), eng_es_data(c[5]),
                       o[0], o[1], o[2], o[3]);
  return eng_es_finish(call, c, o);
}

/* ---- e23_backward: in xw, W_h, W_write, b, h0 (optional), hs, ckpt [B, W] (any float dtype; N
 * is the one that makes W = eng_e23_ckpt_len(T, N, d, C)), dhs, dh_T (optional), dtape_T
 * (optional); attrs i[0] the checkpoint interval C;
 * out dxw, dW_h, dW_write, db, dh0, dtape0 ---- */

eng_status_t eng_infer_e23_backward(eng_op_call_t *call) {
  const char *op = eng_call_name(call);
  eng_status_t st;
  for (int k = 0; k < 10; k++)
    if (!call->in[k] && k != 4 && k != 8 && k != 9)
      return eng_error(ENG_ERR_ARG, "%s: input %d is missing", op, k + 1);
  int64_t B, T, d, C = call->attrs.i[0];
  if ((st = eng_es_seq(op, "xw", call->in[0], &B, &T, &d))) return st;
  if (C < 1)
    return eng_error(ENG_ERR_ARG, "%s: the checkpoint interval must be >= 1, got %lld", op,
                     (long long)C);
  const eng_dtype_t dt = call->in[0]->dtype;
  const eng_tensor_t *ck = call->in[6];
  char s[ENG_OP_SHAPE_BUF];
  if ((st = eng_need_float(op, ck))) return st;
  /* W = per_n*N + T*d (per_n >= 2 as T >= 1): the one N that fits, if any */
  const int64_t per_n = eng_e23_n_ckpt(T, C) * d + 2 * T;
  const int64_t N = ck->ndim == 2 && ck->shape[1] > T * d ? (ck->shape[1] - T * d) / per_n : 0;
  if (ck->ndim != 2 || ck->shape[0] != B || N < 1 || eng_e23_ckpt_len(T, N, d, C) != ck->shape[1])
    return eng_error(ENG_ERR_SHAPE,
                     "%s: ckpt has shape %s but must be [B, W] = [%lld, W] with W = ceil(T/C)*N*d "
                     "+ T*(2N + d) = %lld*N + %lld for some N >= 1 (T = %lld, d = %lld, checkpoint "
                     "interval C = %lld)",
                     op, ENG_SHAPE_STR(ck, s), (long long)B, (long long)per_n, (long long)(T * d),
                     (long long)T, (long long)d, (long long)C);
  const int64_t seq[3] = {B, T, d}, sq[2] = {d, d}, row[2] = {B, d}, tape[3] = {B, N, d};
  if ((st = eng_es_need(op, "W_h", call->in[1], dt, 2, sq))) return st;
  if ((st = eng_es_need(op, "W_write", call->in[2], dt, 2, sq))) return st;
  if ((st = eng_es_need(op, "b", call->in[3], dt, 1, &d))) return st;
  if (call->in[4] && (st = eng_es_need(op, "h0", call->in[4], dt, 2, row))) return st;
  if ((st = eng_es_need(op, "hs", call->in[5], dt, 3, seq))) return st;
  if ((st = eng_es_need(op, "dhs", call->in[7], dt, 3, seq))) return st;
  if (call->in[8] && (st = eng_es_need(op, "dh_T", call->in[8], dt, 2, row))) return st;
  if (call->in[9] && (st = eng_es_need(op, "dtape_T", call->in[9], dt, 3, tape))) return st;
  call->n_out = 6;
  eng_es_meta(call, 0, dt, 3, seq);
  eng_es_meta(call, 1, dt, 2, sq);
  eng_es_meta(call, 2, dt, 2, sq);
  eng_es_meta(call, 3, dt, 1, &d);
  eng_es_meta(call, 4, dt, 2, row);
  eng_es_meta(call, 5, dt, 3, tape);
  return ENG_OK;
}

eng_status_t eng_cpu_e23_backward(const eng_op_call_t *call) {
  eng_tensor_t *c[10];
  double *o[6];
  eng_status_t st = eng_es_stage(call, c);
  if (st) return st;
  if ((st = eng_es_alloc(call, o))) return eng_es_release(call, c), st;
  const int64_t *s = call->in[0]->shape, N = call->out[5]->shape[1];
  eng_kcpu_e23_backward(s[0], s[1], N, s[2], call->attrs.i[0], eng_es_data(c[0]), eng_es_data(c[1]),
                        eng_es_data(c[2]), eng_es_data(c[3]), eng_es_data(c[4]), eng_es_data(c[5]),
                        eng_es_data(c[6]), eng_es_data(c[7]), eng_es_data(c[8]), eng_es_data(c[9]),
                        o[0], o[1], o[2], o[3], o[4], o[5]);
  return eng_es_finish(call, c, o);
}

/* ---- typed functions ---- */

eng_status_t eng_op_e23(eng_tensor_t *xw, eng_tensor_t *W_h, eng_tensor_t *W_write, eng_tensor_t *b,
                        eng_tensor_t *h0, eng_tensor_t *tape0, int64_t n_slots, int64_t ckpt_every,
                        eng_tensor_t **hs, eng_tensor_t **h_T, eng_tensor_t **tape_T,
                        eng_tensor_t **ckpt) {
  eng_tensor_t *in[6] = {xw, W_h, W_write, b, h0, tape0};
  eng_op_call_t call = {.id = ENG_OP_E23, .n_in = 6, .in = in};
  call.attrs.i[0] = n_slots;
  call.attrs.i[1] = ckpt_every;
  call.attrs.ni = 2;
  return eng_es_run(&call, (eng_tensor_t * *const[]){hs, h_T, tape_T, ckpt}, 4);
}

eng_status_t eng_op_e23_backward(eng_tensor_t *xw, eng_tensor_t *W_h, eng_tensor_t *W_write,
                                 eng_tensor_t *b, eng_tensor_t *h0, eng_tensor_t *hs,
                                 eng_tensor_t *ckpt, eng_tensor_t *dhs, eng_tensor_t *dh_T,
                                 eng_tensor_t *dtape_T, int64_t ckpt_every, eng_tensor_t **dxw,
                                 eng_tensor_t **dW_h, eng_tensor_t **dW_write, eng_tensor_t **db,
                                 eng_tensor_t **dh0, eng_tensor_t **dtape0) {
  eng_tensor_t *in[10] = {xw, W_h, W_write, b, h0, hs, ckpt, dhs, dh_T, dtape_T};
  eng_op_call_t call = {.id = ENG_OP_E23_BACKWARD, .n_in = 10, .in = in};
  call.attrs.i[0] = ckpt_every;
  call.attrs.ni = 1;
  return eng_es_run(&call, (eng_tensor_t * *const[]){dxw, dW_h, dW_write, db, dh0, dtape0}, 6);
}
