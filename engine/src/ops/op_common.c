/* Helpers shared by the elementwise, reduction, norm and loss op files. */
#include "ops/op_common.h"

#include <string.h>

const char *eng_call_name(const eng_op_call_t *call) { return eng_op_def(call->id)->name; }

eng_status_t eng_call_need_inputs(const eng_op_call_t *call, int n) {
  for (int k = 0; k < n; k++)
    if (!call->in[k])
      return eng_error(ENG_ERR_ARG, "%s: input %d is missing", eng_call_name(call), k + 1);
  return ENG_OK;
}

void eng_call_meta_like(eng_op_call_t *call, const eng_tensor_t *t, eng_dtype_t dt) {
  eng_op_meta_t *m = &call->meta[0];
  m->ndim = t->ndim;
  memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  m->dtype = dt;
}

eng_status_t eng_call_run(eng_op_call_t *call, eng_tensor_t **out) {
  eng_status_t st = eng_op_dispatch(call);
  if (st) return st;
  *out = call->out[0];
  return ENG_OK;
}

eng_status_t eng_need_float(const char *op, const eng_tensor_t *t) {
  if (eng_dtype_is_float(t->dtype)) return ENG_OK;
  return eng_error(ENG_ERR_DTYPE, "%s: expected a floating dtype, got %s", op,
                   eng_dtype_name(t->dtype));
}

eng_status_t eng_wrap_dim0(const char *op, int64_t dim, int ndim, int *out) {
  return eng_dim_wrap(op, dim, ndim > 0 ? ndim : 1, out);
}

int64_t eng_dims_numel(const int64_t *shape, int lo, int hi) {
  int64_t n = 1;
  for (int d = lo; d < hi; d++) n *= shape[d];
  return n;
}

void eng_dims_split(const eng_tensor_t *x, int lo, int hi, int64_t *outer, int64_t *n, int64_t *inner) {
  if (x->ndim == 0) {
    *outer = *n = *inner = 1;
    return;
  }
  *outer = eng_dims_numel(x->shape, 0, lo);
  *n = eng_dims_numel(x->shape, lo, hi);
  *inner = eng_dims_numel(x->shape, hi, x->ndim);
}

eng_status_t eng_reduce_mask(const eng_op_call_t *call, const eng_tensor_t *x, unsigned *mask) {
  const eng_op_attrs_t *at = &call->attrs;
  if (at->ni == 0) {
    *mask = (1u << x->ndim) - 1;
    return ENG_OK;
  }
  *mask = 0;
  for (int k = 0; k < at->ni; k++) {
    int64_t d = at->i[k];
    if (d < 0 || d >= x->ndim || (k > 0 && d <= at->i[k - 1]))
      return eng_error(ENG_ERR_INDEX,
                       "%s: dims must be ascending, unique and in [0, %d), got %lld at %d",
                       eng_call_name(call), x->ndim, (long long)d, k);
    *mask |= 1u << d;
  }
  return ENG_OK;
}

eng_status_t eng_reduce_layout(eng_tensor_t *x, unsigned mask, eng_tensor_t **xc, int64_t *outer,
                               int64_t *n, int64_t *inner) {
  int first = -1, last = -1, adjacent = 1;
  for (int d = 0; d < x->ndim; d++) {
    if (x->shape[d] == 1 || !(mask & (1u << d))) continue;
    if (first < 0) first = d;
    last = d;
  }
  for (int d = first + 1; d < last; d++)
    if (x->shape[d] != 1 && !(mask & (1u << d))) adjacent = 0;
  if (adjacent) {
    int lo = first < 0 ? x->ndim : first, hi = first < 0 ? x->ndim : last + 1; /* none: n = 1 */
    eng_dims_split(x, lo, hi, outer, n, inner);
    return eng_tensor_contiguous(x, xc);
  }
  int64_t perm[ENG_MAX_DIMS];
  int np = 0;
  *outer = *n = *inner = 1;
  for (int d = 0; d < x->ndim; d++)
    if (!(mask & (1u << d))) {
      perm[np++] = d;
      *outer *= x->shape[d];
    }
  for (int d = 0; d < x->ndim; d++)
    if (mask & (1u << d)) {
      perm[np++] = d;
      *n *= x->shape[d];
    }
  eng_tensor_t *p = NULL;
  eng_status_t st = eng_tensor_permute(x, perm, x->ndim, &p);
  if (st) return st;
  st = eng_tensor_contiguous(p, xc);
  eng_tensor_release(p);
  return st;
}

eng_status_t eng_call_contiguous_inputs(const eng_op_call_t *call, eng_tensor_t **c) {
  for (int k = 0; k < call->n_in; k++) {
    c[k] = NULL;
    if (!call->in[k]) continue;
    eng_status_t st = eng_tensor_contiguous(call->in[k], &c[k]);
    if (st) {
      for (int j = 0; j < k; j++) eng_tensor_release(c[j]);
      return st;
    }
  }
  return ENG_OK;
}

const void *eng_data_or_null(const eng_tensor_t *t) { return t ? eng_tensor_data(t) : NULL; }
