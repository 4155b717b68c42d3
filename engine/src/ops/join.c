/* cat and stack. cat is a registry op with a variable number of inputs (attrs.i[0] = the dim,
 * normalised); stack unsqueezes each input at the new dim and cats them. Mixed dtypes are
 * promoted; pieces of size 0 along the dim are allowed. */
#include <stdlib.h>
#include <string.h>

#include "cpu/copy.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

/* At least one tensor, none missing, none zero-dimensional (a scalar has no dim to join on). */
static eng_status_t check_pieces(eng_tensor_t *const *ts, int n) {
  char s[ENG_OP_SHAPE_BUF];
  if (!ts || n < 1) return eng_error(ENG_ERR_ARG, "cat: needs at least one tensor");
  for (int k = 0; k < n; k++) {
    if (!ts[k]) return eng_error(ENG_ERR_ARG, "cat: tensor %d is missing", k);
    if (ts[k]->ndim == 0)
      return eng_error(ENG_ERR_SHAPE,
                       "cat: tensor %d is zero-dimensional (%s) and cannot be concatenated", k,
                       ENG_SHAPE_STR(ts[k], s));
  }
  return ENG_OK;
}

eng_status_t eng_infer_cat(eng_op_call_t *call) {
  eng_status_t st = check_pieces(call->in, call->n_in);
  if (st) return st;
  const eng_tensor_t *t0 = call->in[0];
  int64_t dim = call->attrs.i[0];
  char s0[ENG_OP_SHAPE_BUF], sk[ENG_OP_SHAPE_BUF];
  if (dim < 0 || dim >= t0->ndim)
    return eng_error(ENG_ERR_INDEX, "cat: dim %lld out of range for %s", (long long)dim,
                     ENG_SHAPE_STR(t0, s0));
  int64_t total = 0;
  eng_dtype_t dt = t0->dtype;
  for (int k = 0; k < call->n_in; k++) {
    const eng_tensor_t *t = call->in[k];
    if (t->ndim != t0->ndim)
      return eng_error(ENG_ERR_SHAPE,
                       "cat: tensors need the same number of dims: tensor 0 is %s, tensor %d is %s",
                       ENG_SHAPE_STR(t0, s0), k, ENG_SHAPE_STR(t, sk));
    for (int d = 0; d < t0->ndim; d++)
      if (d != dim && t->shape[d] != t0->shape[d])
        return eng_error(ENG_ERR_SHAPE,
                         "cat: sizes differ outside dim %lld: tensor 0 is %s, tensor %d is %s",
                         (long long)dim, ENG_SHAPE_STR(t0, s0), k, ENG_SHAPE_STR(t, sk));
    total += t->shape[dim];
    dt = eng_dtype_promote(dt, t->dtype);
  }
  eng_op_meta_t *m = &call->meta[0];
  m->ndim = t0->ndim;
  memcpy(m->shape, t0->shape, sizeof(int64_t) * (size_t)t0->ndim);
  m->shape[dim] = total;
  m->dtype = dt;
  call->n_out = 1;
  return ENG_OK;
}

/* Copies each piece (converting its dtype on the way) into its slab of the output. */
eng_status_t eng_cpu_cat(const eng_op_call_t *call) {
  eng_tensor_t *out = call->out[0];
  int dim = (int)call->attrs.i[0];
  size_t es = eng_dtype_size(out->dtype);
  int64_t at = 0;
  for (int k = 0; k < call->n_in; k++) {
    const eng_tensor_t *t = call->in[k];
    if (eng_tensor_numel(t) == 0) continue;
    char *dst = (char *)eng_tensor_data(out) + at * out->stride[dim] * (int64_t)es;
    eng_kcpu_copy(dst, out->dtype, out->stride, eng_tensor_data(t), t->dtype, t->stride, t->shape,
                  t->ndim);
    at += t->shape[dim];
  }
  return ENG_OK;
}

eng_status_t eng_op_cat(eng_tensor_t *const *ts, int n, int64_t dim, eng_tensor_t **out) {
  *out = NULL;
  eng_status_t st = check_pieces(ts, n);
  if (st) return st;
  int d;
  st = eng_dim_wrap("cat", dim, ts[0]->ndim, &d);
  if (st) return st;
  eng_op_call_t call = {.id = ENG_OP_CAT, .n_in = n, .in = ts, .n_out = 1};
  call.attrs.i[0] = d;
  call.attrs.ni = 1;
  return eng_call_run(&call, out);
}

eng_status_t eng_op_stack(eng_tensor_t *const *ts, int n, int64_t dim, eng_tensor_t **out) {
  *out = NULL;
  char s0[ENG_OP_SHAPE_BUF], sk[ENG_OP_SHAPE_BUF];
  if (!ts || n < 1) return eng_error(ENG_ERR_ARG, "stack: needs at least one tensor");
  for (int k = 0; k < n; k++) {
    if (!ts[k]) return eng_error(ENG_ERR_ARG, "stack: tensor %d is missing", k);
    if (!eng_shape_equal(ts[k], ts[0]))
      return eng_error(ENG_ERR_SHAPE, "stack: shapes differ: tensor 0 is %s, tensor %d is %s",
                       ENG_SHAPE_STR(ts[0], s0), k, ENG_SHAPE_STR(ts[k], sk));
  }
  int d;
  eng_status_t st = eng_dim_wrap("stack", dim, ts[0]->ndim + 1, &d);
  if (st) return st;
  eng_tensor_t **views = calloc((size_t)n, sizeof *views);
  if (!views) return eng_error(ENG_ERR_OOM, "stack: out of memory for %d views", n);
  for (int k = 0; k < n && !st; k++) st = eng_tensor_unsqueeze(ts[k], d, &views[k]);
  if (!st) st = eng_op_cat(views, n, d, out);
  if (st) eng_error_prefix("stack");
  for (int k = 0; k < n; k++) eng_tensor_release(views[k]);
  free(views);
  return st;
}
