/* e88 and e88_backward: the E88 recurrence (kernels/cpu/e88.h has the math and the layouts).
 * Shape/dtype rules, the CPU adapters (on contiguous copies) and the typed functions.
 *
 * attrs of both ops: i[0] ckpt_every (0: eng_e88_default_ckpt_every, kernels/cpu/e88.h), flags
 * ENG_ATTR_E88_NO_L2 | ENG_ATTR_E88_LINEAR.
 * e88:          in  q, k, v, decay, g (optional), S0 (optional)
 *               out y; S_T; ckpt -- the first n_out of them (1 to 3), so inference can skip the
 *               checkpoints and the trace; ckpt [B,H,eng_e88_ckpt_len] in the state dtype
 * e88_backward: in  q, k, v, decay, g, S0, ckpt, dy, dS_T (g, S0, dS_T optional)
 *               out dq, dk, dv, ddecay, dg, dS0 (dg / dS0 are empty [0] tensors without g / S0;
 *               the typed function hands them out as NULL) */
#include "ops/e88.h"

#include <string.h>

#include "eng_autograd.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

enum { Q = ENG_E88_Q, K, V, DECAY, G, S0, CKPT, DY, DST };
static const char *const ROLE[] = {"q", "k", "v", "decay", "g", "S0", "ckpt", "dy", "dS_T"};

eng_dtype_t eng_e88_state_dtype(eng_dtype_t dt) { return dt == ENG_F64 ? ENG_F64 : ENG_F32; }

void eng_e88_shape_of(const eng_op_call_t *call, eng_e88_shape_t *s) {
  const eng_tensor_t *q = call->in[Q], *v = call->in[V];
  s->B = q->shape[0];
  s->T = q->shape[1];
  s->H = q->shape[2];
  s->n = q->shape[3];
  s->v = v->shape[3];
  s->ckpt_every = call->attrs.i[0] ? call->attrs.i[0] : eng_e88_default_ckpt_every(s->n);
  s->l2 = !(call->attrs.flags & ENG_ATTR_E88_NO_L2);
  s->linear_state = (call->attrs.flags & ENG_ATTR_E88_LINEAR) != 0;
}

/* Checks that in[k] (when present, or always when `need`) has dtype dt and shape want[0..nd-1]. */
static eng_status_t check_in(const eng_op_call_t *call, int k, int need, eng_dtype_t dt,
                             const int64_t *want, int nd) {
  const char *name = eng_call_name(call);
  const eng_tensor_t *t = call->in[k];
  char ws[ENG_OP_SHAPE_BUF], ts[ENG_OP_SHAPE_BUF];
  if (!t) return need ? eng_error(ENG_ERR_ARG, "%s: %s is missing", name, ROLE[k]) : ENG_OK;
  if (t->dtype != dt)
    return eng_error(ENG_ERR_DTYPE, "%s: %s must be %s, got %s", name, ROLE[k],
                     eng_dtype_name(dt), eng_dtype_name(t->dtype));
  int same = t->ndim == nd;
  for (int d = 0; same && d < nd; d++) same = t->shape[d] == want[d];
  if (!same)
    return eng_error(ENG_ERR_SHAPE, "%s: %s must have shape %s, got %s", name, ROLE[k],
                     eng_shape_str(want, nd, ws, sizeof ws), ENG_SHAPE_STR(t, ts));
  return ENG_OK;
}

static void set_meta(eng_op_meta_t *m, const int64_t *shape, int nd, eng_dtype_t dt) {
  m->ndim = nd;
  memcpy(m->shape, shape, sizeof(int64_t) * (size_t)nd);
  m->dtype = dt;
}

/* The checks both ops share; fills the shape. */
static eng_status_t check_common(const eng_op_call_t *call, eng_e88_shape_t *s) {
  const char *name = eng_call_name(call);
  const eng_tensor_t *q = call->in[Q], *v = call->in[V];
  char qs[ENG_OP_SHAPE_BUF];
  eng_status_t st;
  for (int k = 0; k < 4; k++)
    if (!call->in[k]) return eng_error(ENG_ERR_ARG, "%s: %s is missing", name, ROLE[k]);
  if ((st = eng_need_float(name, q))) return st;
  if (q->ndim != 4 || q->shape[3] < 1)
    return eng_error(ENG_ERR_SHAPE, "%s: q must be [B,T,H,n] with n >= 1, got %s", name,
                     ENG_SHAPE_STR(q, qs));
  if (v->ndim != 4 || v->shape[3] < 1)
    return eng_error(ENG_ERR_SHAPE, "%s: v must be [B,T,H,v] with v >= 1, got %s", name,
                     ENG_SHAPE_STR(v, qs));
  if (call->attrs.i[0] < 0)
    return eng_error(ENG_ERR_ARG, "%s: ckpt_every must be >= 1, got %lld", name,
                     (long long)call->attrs.i[0]);
  eng_e88_shape_of(call, s);
  const eng_dtype_t dt = q->dtype, sdt = eng_e88_state_dtype(dt);
  const int64_t qk[4] = {s->B, s->T, s->H, s->n}, vg[4] = {s->B, s->T, s->H, s->v},
                dec[3] = {s->B, s->T, s->H}, st4[4] = {s->B, s->H, s->n, s->v};
  if ((st = check_in(call, K, 1, dt, qk, 4)) || (st = check_in(call, V, 1, dt, vg, 4)) ||
      (st = check_in(call, DECAY, 1, dt, dec, 3)) || (st = check_in(call, G, 0, dt, vg, 4)) ||
      (st = check_in(call, S0, 0, sdt, st4, 4)))
    return st;
  return ENG_OK;
}

eng_status_t eng_infer_e88(eng_op_call_t *call) {
  eng_e88_shape_t s;
  eng_status_t st = check_common(call, &s);
  if (st) return st;
  const eng_dtype_t dt = call->in[Q]->dtype, sdt = eng_e88_state_dtype(dt);
  if (call->n_out > 3) call->n_out = 3;
  const int64_t y[4] = {s.B, s.T, s.H, s.v}, st4[4] = {s.B, s.H, s.n, s.v},
                ck[3] = {s.B, s.H, eng_e88_ckpt_len(&s)};
  set_meta(&call->meta[0], y, 4, dt);
  set_meta(&call->meta[1], st4, 4, sdt);
  set_meta(&call->meta[2], ck, 3, sdt);
  return ENG_OK;
}

eng_status_t eng_infer_e88_backward(eng_op_call_t *call) {
  eng_e88_shape_t s;
  eng_status_t st = check_common(call, &s);
  if (st) return st;
  const eng_dtype_t dt = call->in[Q]->dtype, sdt = eng_e88_state_dtype(dt);
  const int64_t vg[4] = {s.B, s.T, s.H, s.v}, st4[4] = {s.B, s.H, s.n, s.v},
                ck[3] = {s.B, s.H, eng_e88_ckpt_len(&s)}, none[1] = {0};
  if ((st = check_in(call, CKPT, 1, sdt, ck, 3)) || (st = check_in(call, DY, 1, dt, vg, 4)) ||
      (st = check_in(call, DST, 0, sdt, st4, 4)))
    return st;
  call->n_out = 6;
  for (int k = 0; k < 4; k++) {
    const eng_tensor_t *t = call->in[k];
    set_meta(&call->meta[k], t->shape, t->ndim, dt);
  }
  if (call->in[G]) set_meta(&call->meta[4], vg, 4, dt);
  else set_meta(&call->meta[4], none, 1, dt);
  if (call->in[S0]) set_meta(&call->meta[5], st4, 4, sdt);
  else set_meta(&call->meta[5], none, 1, sdt);
  return ENG_OK;
}

static eng_status_t out_of_memory(const eng_op_call_t *call) {
  return eng_error(ENG_ERR_OOM, "%s: out of host memory for the per-thread scratch",
                   eng_call_name(call));
}

static void *out_or_null(const eng_op_call_t *call, int k) {
  return k < call->n_out ? eng_tensor_data(call->out[k]) : NULL;
}

eng_status_t eng_cpu_e88(const eng_op_call_t *call) {
  eng_tensor_t *c[6];
  eng_status_t st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  eng_e88_shape_t s;
  eng_e88_shape_of(call, &s);
  const eng_dtype_t dt = c[Q]->dtype;
  int rc = eng_kcpu_e88_forward(dt, eng_e88_state_dtype(dt), &s, eng_tensor_data(c[Q]),
                                eng_tensor_data(c[K]), eng_tensor_data(c[V]),
                                eng_tensor_data(c[DECAY]), eng_data_or_null(c[G]),
                                eng_data_or_null(c[S0]), eng_tensor_data(call->out[0]),
                                out_or_null(call, 1), out_or_null(call, 2));
  for (int k = 0; k < 6; k++) eng_tensor_release(c[k]);
  return rc ? out_of_memory(call) : ENG_OK;
}

eng_status_t eng_cpu_e88_backward(const eng_op_call_t *call) {
  eng_tensor_t *c[9];
  eng_status_t st = eng_call_contiguous_inputs(call, c);
  if (st) return st;
  eng_e88_shape_t s;
  eng_e88_shape_of(call, &s);
  const eng_dtype_t dt = c[Q]->dtype;
  void *o[6];
  for (int k = 0; k < 6; k++) o[k] = eng_tensor_data(call->out[k]);
  int rc = eng_kcpu_e88_backward(
      dt, eng_e88_state_dtype(dt), &s, eng_tensor_data(c[Q]), eng_tensor_data(c[K]),
      eng_tensor_data(c[V]), eng_tensor_data(c[DECAY]), eng_data_or_null(c[G]),
      eng_tensor_data(c[CKPT]), eng_tensor_data(c[DY]), eng_data_or_null(c[DST]), o[0], o[1], o[2],
      o[3], c[G] ? o[4] : NULL, c[S0] ? o[5] : NULL);
  for (int k = 0; k < 9; k++) eng_tensor_release(c[k]);
  return rc ? out_of_memory(call) : ENG_OK;
}

/* ---- typed functions ---- */

static const eng_e88_opts_t DEFAULTS = {.l2 = 1, .linear_state = 0, .ckpt_every = 0};

static eng_status_t set_attrs(const char *op, const eng_e88_opts_t *o, eng_op_attrs_t *a) {
  if (!o) o = &DEFAULTS;
  if (o->ckpt_every < 0)
    return eng_error(ENG_ERR_ARG, "%s: ckpt_every must be >= 1 (or 0: the default), got %d", op,
                     o->ckpt_every);
  a->i[0] = o->ckpt_every;
  a->ni = 1;
  a->flags = (o->l2 ? 0 : ENG_ATTR_E88_NO_L2) | (o->linear_state ? ENG_ATTR_E88_LINEAR : 0);
  return ENG_OK;
}

eng_status_t eng_op_e88(eng_tensor_t *q, eng_tensor_t *k, eng_tensor_t *v, eng_tensor_t *decay,
                        eng_tensor_t *g, eng_tensor_t *S0, const eng_e88_opts_t *opts,
                        eng_tensor_t **y, eng_tensor_t **S_T, eng_tensor_t **ckpt) {
  if (!y) return eng_error(ENG_ERR_ARG, "e88: y must not be NULL");
  eng_tensor_t *in[6] = {q, k, v, decay, g, S0};
  /* When autograd records this call, its node keeps the checkpoints for the backward. */
  int recorded = 0;
  for (int i = 0; i < 6 && eng_grad_enabled(); i++) recorded |= in[i] && eng_tensor_requires_grad(in[i]);
  eng_op_call_t call = {.id = ENG_OP_E88, .n_in = 6, .in = in, .n_out = ckpt || recorded ? 3 : S_T ? 2 : 1};
  eng_status_t st = set_attrs("e88", opts, &call.attrs);
  if (st || (st = eng_op_dispatch(&call))) return st;
  *y = call.out[0];
  if (S_T) *S_T = call.out[1];
  else if (call.n_out > 1) eng_tensor_release(call.out[1]);
  if (ckpt) *ckpt = call.out[2];
  else if (call.n_out > 2) eng_tensor_release(call.out[2]);
  return ENG_OK;
}

eng_status_t eng_op_e88_backward(eng_tensor_t *q, eng_tensor_t *k, eng_tensor_t *v,
                                 eng_tensor_t *decay, eng_tensor_t *g, eng_tensor_t *S0,
                                 eng_tensor_t *ckpt, eng_tensor_t *dy, eng_tensor_t *dS_T,
                                 const eng_e88_opts_t *opts, eng_e88_grads_t *out) {
  if (!out) return eng_error(ENG_ERR_ARG, "e88_backward: out must not be NULL");
  eng_tensor_t *in[9] = {q, k, v, decay, g, S0, ckpt, dy, dS_T};
  eng_op_call_t call = {.id = ENG_OP_E88_BACKWARD, .n_in = 9, .in = in, .n_out = 6};
  eng_status_t st = set_attrs("e88_backward", opts, &call.attrs);
  if (st || (st = eng_op_dispatch(&call))) return st;
  out->dq = call.out[0];
  out->dk = call.out[1];
  out->dv = call.out[2];
  out->ddecay = call.out[3];
  out->dg = g ? call.out[4] : NULL;
  out->dS0 = S0 ? call.out[5] : NULL;
  if (!g) eng_tensor_release(call.out[4]);
  if (!S0) eng_tensor_release(call.out[5]);
  return ENG_OK;
}
