/* The optimizer ops: adamw_ and scale_ (in place, no outputs: the registry's ENG_OPDEF_INPLACE)
 * and sum_squares (one scalar). Shape rules, the CPU adapters and the typed functions; the
 * typed functions bump the version of every tensor they write. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "eng_autograd.h"
#include "cpu/convert.h"
#include "cpu/optim.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"
#include "ops/optim.h"

static const char *const LIST_NAME[4] = {"param", "grad", "exp_avg", "exp_avg_sq"};

/* "bf16 [4,5]" */
static const char *describe(const eng_tensor_t *t, char *buf, size_t n) {
  char s[ENG_OP_SHAPE_BUF];
  snprintf(buf, n, "%s %s", eng_dtype_name(t->dtype), ENG_SHAPE_STR(t, s));
  return buf;
}

/* ---- adamw_ ---- */

static eng_status_t check_hparams(const eng_op_attrs_t *a) {
  double lr = a->f[0], b1 = a->f[1], b2 = a->f[2], eps = a->f[3], wd = a->f[4];
  if (!(lr >= 0) || !isfinite(lr)) return eng_error(ENG_ERR_ARG, "adamw_: lr must be >= 0, got %g", lr);
  if (!(b1 >= 0 && b1 < 1)) return eng_error(ENG_ERR_ARG, "adamw_: beta1 must be in [0, 1), got %g", b1);
  if (!(b2 >= 0 && b2 < 1)) return eng_error(ENG_ERR_ARG, "adamw_: beta2 must be in [0, 1), got %g", b2);
  if (!(eps > 0) || !isfinite(eps)) return eng_error(ENG_ERR_ARG, "adamw_: eps must be > 0, got %g", eps);
  if (!(wd >= 0) || !isfinite(wd))
    return eng_error(ENG_ERR_ARG, "adamw_: weight_decay must be >= 0, got %g", wd);
  if (a->i[0] < 1)
    return eng_error(ENG_ERR_ARG, "adamw_: step must be >= 1 (the count of this update), got %lld",
                     (long long)a->i[0]);
  return ENG_OK;
}

/* Entry k of the 4n inputs: list k / n, position k % n. */
static eng_status_t check_adamw_entry(const eng_op_call_t *call, int n, int i) {
  const eng_tensor_t *p = call->in[i];
  char a[ENG_OP_SHAPE_BUF + 16], b[ENG_OP_SHAPE_BUF + 16];
  eng_dtype_t moment = p->dtype == ENG_F64 ? ENG_F64 : ENG_F32;
  if (!eng_dtype_is_float(p->dtype))
    return eng_error(ENG_ERR_DTYPE, "adamw_: param %d of %d is %s; params must be floating", i + 1,
                     n, describe(p, a, sizeof a));
  for (int l = 0; l < 4; l++) {
    const eng_tensor_t *t = call->in[l * n + i];
    if (!eng_shape_equal(t, p))
      return eng_error(ENG_ERR_SHAPE, "adamw_: param %d of %d is %s but its %s is %s", i + 1, n,
                       describe(p, a, sizeof a), LIST_NAME[l], describe(t, b, sizeof b));
    if (!eng_tensor_is_contiguous(t))
      return eng_error(ENG_ERR_LAYOUT, "adamw_: %s %d of %d (%s) must be contiguous", LIST_NAME[l],
                       i + 1, n, describe(t, a, sizeof a));
    int ok = l == 0 || (l == 1 ? t->dtype == p->dtype || t->dtype == ENG_F32 : t->dtype == moment);
    int or_f32 = l == 1 && p->dtype != ENG_F32;
    if (!ok)
      return eng_error(ENG_ERR_DTYPE, "adamw_: param %d of %d is %s, so its %s must be %s%s, got %s",
                       i + 1, n, describe(p, a, sizeof a), LIST_NAME[l],
                       eng_dtype_name(l == 1 ? p->dtype : moment), or_f32 ? " or f32" : "",
                       eng_dtype_name(t->dtype));
  }
  return ENG_OK;
}

eng_status_t eng_infer_adamw(eng_op_call_t *call) {
  call->n_out = 0;
  if (call->n_in < 4 || call->n_in % 4)
    return eng_error(ENG_ERR_ARG, "adamw_: expected 4 lists of n >= 1 tensors (4n inputs), got %d",
                     call->n_in);
  eng_status_t st = eng_call_need_inputs(call, call->n_in);
  if (!st) st = check_hparams(&call->attrs);
  int n = call->n_in / 4;
  for (int i = 0; !st && i < n; i++) st = check_adamw_entry(call, n, i);
  return st;
}

void eng_adamw_coefs(const eng_op_attrs_t *a, eng_k_adamw_t *h) {
  double lr = a->f[0], b1 = a->f[1], b2 = a->f[2], step = (double)a->i[0];
  h->beta1 = b1;
  h->beta2 = b2;
  h->omb1 = 1 - b1;
  h->omb2 = 1 - b2;
  h->decay = 1 - lr * a->f[4];
  h->step_size = lr / (1 - pow(b1, step));
  h->bc2_sqrt = sqrt(1 - pow(b2, step));
  h->eps = a->f[3];
}

eng_status_t eng_cpu_adamw(const eng_op_call_t *call) {
  int n = call->n_in / 4;
  eng_k_adamw_t h;
  eng_adamw_coefs(&call->attrs, &h);
  for (int i = 0; i < n; i++) {
    eng_tensor_t *p = call->in[i], *g = call->in[n + i], *m = call->in[2 * n + i],
                 *v = call->in[3 * n + i];
    if (eng_kcpu_adamw(eng_tensor_data(p), p->dtype, eng_tensor_data(g), g->dtype,
                       eng_tensor_data(m), eng_tensor_data(v), eng_tensor_numel(p), &h))
      return eng_error(ENG_ERR_INTERNAL, "adamw_: no kernel for %s params with %s grads",
                       eng_dtype_name(p->dtype), eng_dtype_name(g->dtype));
  }
  return ENG_OK;
}

eng_status_t eng_op_adamw_(eng_tensor_t *const *params, eng_tensor_t *const *grads,
                           eng_tensor_t *const *exp_avg, eng_tensor_t *const *exp_avg_sq, int n,
                           const eng_adamw_hparams_t *h) {
  if (n < 0 || (n > 0 && (!params || !grads || !exp_avg || !exp_avg_sq)) || !h)
    return eng_error(ENG_ERR_ARG, "adamw_: missing argument");
  if (n == 0) return ENG_OK;
  eng_tensor_t **in = malloc(sizeof(eng_tensor_t *) * 4 * (size_t)n);
  if (!in) return eng_error(ENG_ERR_OOM, "adamw_: out of memory for %d tensors", n);
  for (int i = 0; i < n; i++) {
    in[i] = params[i];
    in[n + i] = grads[i];
    in[2 * n + i] = exp_avg[i];
    in[3 * n + i] = exp_avg_sq[i];
  }
  eng_op_call_t call = {.id = ENG_OP_ADAMW, .n_in = 4 * n, .in = in};
  call.attrs.f[0] = h->lr;
  call.attrs.f[1] = h->beta1;
  call.attrs.f[2] = h->beta2;
  call.attrs.f[3] = h->eps;
  call.attrs.f[4] = h->weight_decay;
  call.attrs.i[0] = h->step;
  call.attrs.ni = 1;
  eng_status_t st = eng_op_dispatch(&call);
  for (int k = 0; !st && k < 4 * n; k++)
    if (k / n != 1) eng_tensor_bump_version(in[k]); /* params and moments; grads are only read */
  free(in);
  return st;
}

/* ---- sum_squares ---- */

eng_status_t eng_infer_sum_squares(eng_op_call_t *call) {
  if (call->n_in < 1) return eng_error(ENG_ERR_ARG, "sum_squares: needs at least one tensor");
  eng_status_t st = eng_call_need_inputs(call, call->n_in);
  if (st) return st;
  eng_dtype_t dt = ENG_F32;
  for (int k = 0; k < call->n_in; k++) {
    const eng_tensor_t *t = call->in[k];
    char a[ENG_OP_SHAPE_BUF + 16];
    if (!eng_dtype_is_float(t->dtype))
      return eng_error(ENG_ERR_DTYPE, "sum_squares: tensor %d of %d is %s; expected a floating dtype",
                       k + 1, call->n_in, describe(t, a, sizeof a));
    if (t->dtype == ENG_F64) dt = ENG_F64;
  }
  eng_op_meta_t *m = &call->meta[0];
  m->ndim = 0;
  m->dtype = dt;
  call->n_out = 1;
  return ENG_OK;
}

eng_status_t eng_cpu_sum_squares(const eng_op_call_t *call) {
  double total = 0;
  for (int k = 0; k < call->n_in; k++) {
    eng_tensor_t *c = NULL;
    eng_status_t st = eng_tensor_contiguous(call->in[k], &c);
    if (st) return st;
    total += eng_kcpu_sum_squares(eng_tensor_data(c), c->dtype, eng_tensor_numel(c));
    eng_tensor_release(c);
  }
  eng_tensor_t *out = call->out[0];
  eng_k_store(eng_tensor_data(out), out->dtype, 0, total);
  return ENG_OK;
}

eng_status_t eng_op_sum_squares(eng_tensor_t *const *ts, int n, eng_tensor_t **out) {
  *out = NULL;
  if (n < 1 || !ts) return eng_error(ENG_ERR_ARG, "sum_squares: needs at least one tensor");
  eng_op_call_t call = {.id = ENG_OP_SUM_SQUARES, .n_in = n, .in = ts, .n_out = 1};
  return eng_call_run(&call, out);
}

/* ---- scale_ ---- */

eng_status_t eng_infer_scale(eng_op_call_t *call) {
  call->n_out = 0;
  if (call->n_in < 1) return eng_error(ENG_ERR_ARG, "scale_: needs the scale");
  eng_status_t st = eng_call_need_inputs(call, call->n_in);
  if (st) return st;
  int n = call->n_in - 1;
  const eng_tensor_t *s = call->in[n];
  char a[ENG_OP_SHAPE_BUF + 16];
  if (!eng_dtype_is_float(s->dtype) || eng_tensor_numel(s) != 1)
    return eng_error(ENG_ERR_ARG, "scale_: the scale must be one floating element, got %s",
                     describe(s, a, sizeof a));
  for (int k = 0; k < n; k++) {
    const eng_tensor_t *t = call->in[k];
    if (!eng_dtype_is_float(t->dtype))
      return eng_error(ENG_ERR_DTYPE, "scale_: tensor %d of %d is %s; expected a floating dtype",
                       k + 1, n, describe(t, a, sizeof a));
    if (!eng_tensor_is_contiguous(t))
      return eng_error(ENG_ERR_LAYOUT, "scale_: tensor %d of %d (%s) must be contiguous", k + 1, n,
                       describe(t, a, sizeof a));
    /* on CUDA every block reads the scale: it must not change under them */
    if (t->storage == s->storage)
      return eng_error(ENG_ERR_ARG, "scale_: tensor %d of %d shares memory with the scale", k + 1, n);
  }
  return ENG_OK;
}

eng_status_t eng_cpu_scale(const eng_op_call_t *call) {
  int n = call->n_in - 1;
  const eng_tensor_t *s = call->in[n];
  double v = eng_k_load(eng_tensor_data(s), s->dtype, 0);
  for (int k = 0; k < n; k++) {
    eng_tensor_t *t = call->in[k];
    eng_kcpu_scale(eng_tensor_data(t), t->dtype, eng_tensor_numel(t), v);
  }
  return ENG_OK;
}

eng_status_t eng_op_scale_(eng_tensor_t *const *ts, int n, eng_tensor_t *scale) {
  if (n < 0 || (n > 0 && !ts) || !scale) return eng_error(ENG_ERR_ARG, "scale_: missing argument");
  eng_tensor_t **in = malloc(sizeof(eng_tensor_t *) * ((size_t)n + 1));
  if (!in) return eng_error(ENG_ERR_OOM, "scale_: out of memory for %d tensors", n);
  for (int k = 0; k < n; k++) in[k] = ts[k];
  in[n] = scale;
  eng_op_call_t call = {.id = ENG_OP_SCALE, .n_in = n + 1, .in = in};
  eng_status_t st = eng_op_dispatch(&call);
  for (int k = 0; !st && k < n; k++) eng_tensor_bump_version(in[k]);
  free(in);
  return st;
}
