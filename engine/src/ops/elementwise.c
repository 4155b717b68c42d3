/* Elementwise ops: their shape/dtype rules, the CPU adapters onto kernels/cpu/elementwise, and
 * the typed functions of eng_ops.h (which promote mixed dtypes before dispatch, so that the rules
 * only ever see inputs of one dtype). */
#include <math.h>
#include <string.h>

#include "cpu/elementwise.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

/* The public op enums index into runs of the registry's op list. */
_Static_assert(ENG_OP_SOFTPLUS - ENG_OP_NEG == ENG_UNARY_SOFTPLUS, "unary ops out of step");
_Static_assert(ENG_OP_GE - ENG_OP_ADD == ENG_BINARY_GE, "binary ops out of step");

const char *eng_unary_name(eng_unary_op_t op) {
  if ((unsigned)op >= ENG_UNARY_COUNT) return "unknown";
  return eng_op_def((eng_op_id_t)(ENG_OP_NEG + op))->name;
}

const char *eng_binary_name(eng_binary_op_t op) {
  if ((unsigned)op >= ENG_BINARY_COUNT) return "unknown";
  return eng_op_def((eng_op_id_t)(ENG_OP_ADD + op))->name;
}

/* ---- the strided walk: output first, inputs broadcast to its shape ---- */

static void nd_setup(eng_kcpu_nd_t *it, eng_tensor_t *out, eng_tensor_t *const *in, int n_in) {
  eng_kcpu_nd_init(it, out->ndim, out->shape, n_in + 1);
  eng_kcpu_nd_operand(it, 0, eng_tensor_data(out), eng_dtype_size(out->dtype), out->stride);
  for (int k = 0; k < n_in; k++) {
    const eng_tensor_t *t = in[k];
    int64_t stride[ENG_MAX_DIMS];
    int lead = out->ndim - t->ndim; /* t's dims line up with the output's last ones */
    for (int d = 0; d < out->ndim; d++)
      stride[d] = d < lead || t->shape[d - lead] == 1 ? 0 : t->stride[d - lead];
    eng_kcpu_nd_operand(it, k + 1, eng_tensor_data(t), eng_dtype_size(t->dtype), stride);
  }
}

/* meta[0] = the broadcast of inputs 0..n-1 with dtype dt. */
static eng_status_t meta_broadcast(eng_op_call_t *call, int n, eng_dtype_t dt) {
  eng_op_meta_t *m = &call->meta[0];
  eng_status_t st = eng_broadcast_shapes(eng_call_name(call), (const eng_tensor_t *const *)call->in,
                                         n, m->shape, &m->ndim);
  m->dtype = dt;
  return st;
}

static eng_status_t same_dtype(const char *op, const eng_tensor_t *a, const eng_tensor_t *b) {
  if (a->dtype == b->dtype) return ENG_OK;
  return eng_error(ENG_ERR_DTYPE, "%s: inputs have different dtypes %s and %s (promote them first)",
                   op, eng_dtype_name(a->dtype), eng_dtype_name(b->dtype));
}

/* ---- unary ---- */

eng_status_t eng_infer_unary(eng_op_call_t *call) {
  eng_status_t st = eng_call_need_inputs(call, 1);
  if (st) return st;
  const eng_tensor_t *x = call->in[0];
  const char *name = eng_call_name(call);
  eng_unary_op_t op = (eng_unary_op_t)(call->id - ENG_OP_NEG);
  if (!eng_dtype_is_float(x->dtype)) {
    if (op != ENG_UNARY_NEG && op != ENG_UNARY_ABS && op != ENG_UNARY_RELU)
      return eng_need_float(name, x);
    if (op == ENG_UNARY_NEG && x->dtype == ENG_U8)
      return eng_error(ENG_ERR_DTYPE, "neg: not defined for the unsigned dtype u8");
  }
  eng_call_meta_like(call, x, x->dtype);
  return ENG_OK;
}

eng_status_t eng_cpu_unary(const eng_op_call_t *call) {
  eng_kcpu_nd_t it;
  nd_setup(&it, call->out[0], call->in, 1);
  eng_kcpu_unary((eng_unary_op_t)(call->id - ENG_OP_NEG), call->in[0]->dtype, &it);
  return ENG_OK;
}

eng_status_t eng_op_unary(eng_unary_op_t op, eng_tensor_t *x, eng_tensor_t **out) {
  if ((unsigned)op >= ENG_UNARY_COUNT)
    return eng_error(ENG_ERR_ARG, "unary: unknown op %d", (int)op);
  eng_tensor_t *in[1] = {x};
  eng_op_call_t call = {.id = (eng_op_id_t)(ENG_OP_NEG + op), .n_in = 1, .in = in};
  return eng_call_run(&call, out);
}

/* ---- binary ---- */

static int is_comparison(eng_op_id_t id) { return id >= ENG_OP_EQ && id <= ENG_OP_GE; }

eng_status_t eng_infer_binary(eng_op_call_t *call) {
  eng_status_t st = eng_call_need_inputs(call, 2);
  if (st) return st;
  const eng_tensor_t *a = call->in[0], *b = call->in[1];
  const char *name = eng_call_name(call);
  if ((st = same_dtype(name, a, b))) return st;
  if (call->id == ENG_OP_DIV && !eng_dtype_is_float(a->dtype))
    return eng_error(ENG_ERR_DTYPE, "div: %s inputs must be converted to a floating dtype first",
                     eng_dtype_name(a->dtype));
  return meta_broadcast(call, 2, is_comparison(call->id) ? ENG_U8 : a->dtype);
}

eng_status_t eng_cpu_binary(const eng_op_call_t *call) {
  eng_kcpu_nd_t it;
  nd_setup(&it, call->out[0], call->in, 2);
  if (eng_kcpu_binary((eng_binary_op_t)(call->id - ENG_OP_ADD), call->in[0]->dtype, &it))
    return eng_error(ENG_ERR_ARG,
                     "pow: negative exponent with %s inputs (convert to a floating dtype)",
                     eng_dtype_name(call->in[0]->dtype));
  return ENG_OK;
}

eng_status_t eng_op_binary(eng_binary_op_t op, eng_tensor_t *a, eng_tensor_t *b,
                           eng_tensor_t **out) {
  if ((unsigned)op >= ENG_BINARY_COUNT)
    return eng_error(ENG_ERR_ARG, "binary: unknown op %d", (int)op);
  const char *name = eng_binary_name(op);
  if (!a || !b) return eng_error(ENG_ERR_ARG, "%s: input %d is missing", name, a ? 2 : 1);
  eng_dtype_t dt = eng_dtype_promote(a->dtype, b->dtype);
  if (op == ENG_BINARY_DIV && !eng_dtype_is_float(dt)) dt = ENG_F32; /* true division */
  eng_tensor_t *ca = NULL, *cb = NULL;
  eng_status_t st = eng_tensor_to_dtype(a, dt, &ca);
  if (!st) st = eng_tensor_to_dtype(b, dt, &cb);
  if (!st) {
    eng_tensor_t *in[2] = {ca, cb};
    eng_op_call_t call = {.id = (eng_op_id_t)(ENG_OP_ADD + op), .n_in = 2, .in = in};
    st = eng_call_run(&call, out);
  }
  eng_tensor_release(ca);
  eng_tensor_release(cb);
  return st;
}

/* ---- clamp ---- */

eng_status_t eng_infer_clamp(eng_op_call_t *call) {
  eng_status_t st = eng_call_need_inputs(call, 1);
  if (st) return st;
  const eng_op_attrs_t *at = &call->attrs;
  if (!(at->flags & (ENG_ATTR_HAS_LO | ENG_ATTR_HAS_HI)))
    return eng_error(ENG_ERR_ARG, "clamp: give at least one of lo and hi");
  if ((at->flags & ENG_ATTR_HAS_LO) && isnan(at->f[0]))
    return eng_error(ENG_ERR_ARG, "clamp: lo is NaN");
  if ((at->flags & ENG_ATTR_HAS_HI) && isnan(at->f[1]))
    return eng_error(ENG_ERR_ARG, "clamp: hi is NaN");
  eng_call_meta_like(call, call->in[0], call->in[0]->dtype);
  return ENG_OK;
}

eng_status_t eng_cpu_clamp(const eng_op_call_t *call) {
  const eng_op_attrs_t *at = &call->attrs;
  eng_kcpu_nd_t it;
  nd_setup(&it, call->out[0], call->in, 1);
  eng_kcpu_clamp(call->in[0]->dtype, !!(at->flags & ENG_ATTR_HAS_LO), at->f[0],
                 !!(at->flags & ENG_ATTR_HAS_HI), at->f[1], &it);
  return ENG_OK;
}

eng_status_t eng_op_clamp(eng_tensor_t *x, int has_lo, double lo, int has_hi, double hi,
                          eng_tensor_t **out) {
  eng_tensor_t *in[1] = {x};
  eng_op_call_t call = {.id = ENG_OP_CLAMP, .n_in = 1, .in = in};
  call.attrs.flags = (has_lo ? ENG_ATTR_HAS_LO : 0) | (has_hi ? ENG_ATTR_HAS_HI : 0);
  call.attrs.f[0] = lo;
  call.attrs.f[1] = hi;
  return eng_call_run(&call, out);
}

/* ---- where ---- */

eng_status_t eng_infer_where(eng_op_call_t *call) {
  eng_status_t st = eng_call_need_inputs(call, 3);
  if (st) return st;
  if ((st = same_dtype("where", call->in[1], call->in[2]))) return st;
  return meta_broadcast(call, 3, call->in[1]->dtype);
}

eng_status_t eng_cpu_where(const eng_op_call_t *call) {
  eng_kcpu_nd_t it;
  nd_setup(&it, call->out[0], call->in, 3);
  eng_kcpu_where(call->in[0]->dtype, &it);
  return ENG_OK;
}

eng_status_t eng_op_where(eng_tensor_t *cond, eng_tensor_t *a, eng_tensor_t *b,
                          eng_tensor_t **out) {
  if (!a || !b) return eng_error(ENG_ERR_ARG, "where: input %d is missing", a ? 3 : 2);
  eng_dtype_t dt = eng_dtype_promote(a->dtype, b->dtype);
  eng_tensor_t *ca = NULL, *cb = NULL;
  eng_status_t st = eng_tensor_to_dtype(a, dt, &ca);
  if (!st) st = eng_tensor_to_dtype(b, dt, &cb);
  if (!st) {
    eng_tensor_t *in[3] = {cond, ca, cb};
    eng_op_call_t call = {.id = ENG_OP_WHERE, .n_in = 3, .in = in};
    st = eng_call_run(&call, out);
  }
  eng_tensor_release(ca);
  eng_tensor_release(cb);
  return st;
}
