/* Reductions over a set of dims and argmax: shape/dtype rules, CPU adapters, typed functions.
 * The adapters bring x into a contiguous [outer, n, inner] array whose middle dim holds the
 * reduced elements, which is what kernels/cpu/reduce takes. */
#include <string.h>

#include "cpu/reduce.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

_Static_assert(ENG_OP_STD - ENG_OP_SUM == ENG_REDUCE_STD, "reduce ops out of step");

const char *eng_reduce_name(eng_reduce_op_t op) {
  if ((unsigned)op >= ENG_REDUCE_COUNT) return "unknown";
  return eng_op_def((eng_op_id_t)(ENG_OP_SUM + op))->name;
}

eng_status_t eng_infer_reduce(eng_op_call_t *call) {
  eng_status_t st = eng_call_need_inputs(call, 1);
  if (st) return st;
  const eng_tensor_t *x = call->in[0];
  const char *name = eng_call_name(call);
  eng_reduce_op_t op = (eng_reduce_op_t)(call->id - ENG_OP_SUM);
  int is_float = eng_dtype_is_float(x->dtype);
  if (!is_float && op != ENG_REDUCE_SUM && op != ENG_REDUCE_MAX && op != ENG_REDUCE_MIN)
    return eng_need_float(name, x);
  unsigned mask;
  if ((st = eng_reduce_mask(call, x, &mask))) return st;

  eng_op_meta_t *m = &call->meta[0];
  int keep = call->attrs.flags & ENG_ATTR_KEEPDIM;
  int64_t n = 1;
  m->ndim = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (mask & (1u << d)) {
      n *= x->shape[d];
      if (keep) m->shape[m->ndim++] = 1;
    } else {
      m->shape[m->ndim++] = x->shape[d];
    }
  }
  if (n == 0 && (op == ENG_REDUCE_MAX || op == ENG_REDUCE_MIN)) {
    char s[ENG_OP_SHAPE_BUF];
    return eng_error(ENG_ERR_SHAPE, "%s: the reduced dims of x %s hold no elements", name,
                     ENG_SHAPE_STR(x, s));
  }
  m->dtype = !is_float && op == ENG_REDUCE_SUM ? ENG_I64 : x->dtype;
  return ENG_OK;
}

eng_status_t eng_cpu_reduce(const eng_op_call_t *call) {
  eng_status_t st;
  eng_tensor_t *x = call->in[0], *xc = NULL;
  unsigned mask;
  int64_t outer, n, inner;
  st = eng_reduce_mask(call, x, &mask);
  if (!st) st = eng_reduce_layout(x, mask, &xc, &outer, &n, &inner);
  if (st) return st;
  eng_kcpu_reduce((eng_reduce_op_t)(call->id - ENG_OP_SUM), x->dtype, eng_tensor_data(xc),
                  eng_tensor_data(call->out[0]), outer, n, inner, call->attrs.f[0]);
  eng_tensor_release(xc);
  return ENG_OK;
}

eng_status_t eng_op_reduce(eng_reduce_op_t op, eng_tensor_t *x, const int64_t *dims, int ndims,
                           int keepdim, int correction, eng_tensor_t **out) {
  if ((unsigned)op >= ENG_REDUCE_COUNT)
    return eng_error(ENG_ERR_ARG, "reduce: unknown op %d", (int)op);
  const char *name = eng_reduce_name(op);
  if (!x) return eng_error(ENG_ERR_ARG, "%s: input 1 is missing", name);
  if (ndims < 0 || (ndims > 0 && !dims))
    return eng_error(ENG_ERR_ARG, "%s: bad dim list (%d dims)", name, ndims);
  unsigned seen = 0;
  for (int k = 0; k < ndims; k++) {
    int d;
    eng_status_t st = eng_wrap_dim0(name, dims[k], x->ndim, &d);
    if (st) return st;
    if (seen & (1u << d))
      return eng_error(ENG_ERR_ARG, "%s: dim %d is given more than once", name, d);
    seen |= 1u << d;
  }
  eng_tensor_t *in[1] = {x};
  eng_op_call_t call = {.id = (eng_op_id_t)(ENG_OP_SUM + op), .n_in = 1, .in = in};
  /* A 0-d tensor's only dim is "all dims"; otherwise list the set, ascending. */
  for (int d = 0; d < x->ndim; d++)
    if (seen & (1u << d)) call.attrs.i[call.attrs.ni++] = d;
  call.attrs.flags = keepdim ? ENG_ATTR_KEEPDIM : 0;
  call.attrs.f[0] = correction;
  return eng_call_run(&call, out);
}

/* ---- argmax ---- */

eng_status_t eng_infer_argmax(eng_op_call_t *call) {
  eng_status_t st = eng_call_need_inputs(call, 1);
  if (st) return st;
  const eng_tensor_t *x = call->in[0];
  const eng_op_attrs_t *at = &call->attrs;
  eng_op_meta_t *m = &call->meta[0];
  int keep = at->flags & ENG_ATTR_KEEPDIM;
  int64_t n;
  m->dtype = ENG_I64;
  m->ndim = 0;
  if (at->flags & ENG_ATTR_FLATTEN) {
    n = eng_tensor_numel(x);
    if (keep)
      for (int d = 0; d < x->ndim; d++) m->shape[m->ndim++] = 1;
  } else {
    int64_t dim = at->i[0];
    if (dim < 0 || dim >= (x->ndim > 0 ? x->ndim : 1))
      return eng_error(ENG_ERR_INDEX, "argmax: dim %lld is out of range for %d dims",
                       (long long)dim, x->ndim);
    n = x->ndim > 0 ? x->shape[dim] : 1;
    for (int d = 0; d < x->ndim; d++) {
      if (d != dim)
        m->shape[m->ndim++] = x->shape[d];
      else if (keep)
        m->shape[m->ndim++] = 1;
    }
  }
  if (n == 0) {
    char s[ENG_OP_SHAPE_BUF];
    return eng_error(ENG_ERR_SHAPE, "argmax: no elements to take the argmax of (x has shape %s)",
                     ENG_SHAPE_STR(x, s));
  }
  return ENG_OK;
}

eng_status_t eng_cpu_argmax(const eng_op_call_t *call) {
  eng_status_t st;
  eng_tensor_t *x = call->in[0], *xc = NULL;
  int64_t outer, n, inner;
  if (call->attrs.flags & ENG_ATTR_FLATTEN)
    eng_dims_split(x, 0, x->ndim, &outer, &n, &inner);
  else
    eng_dims_split(x, (int)call->attrs.i[0], (int)call->attrs.i[0] + 1, &outer, &n, &inner);
  st = eng_tensor_contiguous(x, &xc);
  if (st) return st;
  eng_kcpu_argmax(x->dtype, eng_tensor_data(xc), eng_tensor_data(call->out[0]), outer, n, inner);
  eng_tensor_release(xc);
  return ENG_OK;
}

eng_status_t eng_op_argmax(eng_tensor_t *x, int64_t dim, int flatten, int keepdim,
                           eng_tensor_t **out) {
  if (!x) return eng_error(ENG_ERR_ARG, "argmax: input 1 is missing");
  int d = 0;
  if (!flatten) {
    eng_status_t st = eng_wrap_dim0("argmax", dim, x->ndim, &d);
    if (st) return st;
  }
  eng_tensor_t *in[1] = {x};
  eng_op_call_t call = {.id = ENG_OP_ARGMAX, .n_in = 1, .in = in};
  call.attrs.i[0] = d;
  call.attrs.ni = 1;
  call.attrs.flags = (keepdim ? ENG_ATTR_KEEPDIM : 0) | (flatten ? ENG_ATTR_FLATTEN : 0);
  return eng_call_run(&call, out);
}
