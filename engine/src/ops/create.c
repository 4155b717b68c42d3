/* The creation ops (arange/linspace, eye, rand, randn, randint): shape rules and CPU adapters. */
#include <math.h>

#include "core/tensor_internal.h"
#include "cpu/create.h"
#include "cpu/random.h"
#include "ops/ops_internal.h"

/* rand/randn: a floating dtype and finite parameters (low <= high, std >= 0). */
static eng_status_t check_real_random(const eng_op_call_t *call, const char *op) {
  const eng_op_attrs_t *a = &call->attrs;
  double x = a->f[0], y = a->f[1];
  if (!eng_dtype_is_float(a->dtype))
    return eng_error(ENG_ERR_DTYPE, "%s: dtype %s is not a floating dtype%s", op,
                     eng_dtype_name(a->dtype),
                     call->id == ENG_OP_RAND ? " (use randint for integers)" : "");
  if (!isfinite(x) || !isfinite(y))
    return eng_error(ENG_ERR_ARG, "%s: parameters must be finite (got %g, %g)", op, x, y);
  if (call->id == ENG_OP_RAND && x > y)
    return eng_error(ENG_ERR_ARG, "rand: low %g is above high %g", x, y);
  if (call->id == ENG_OP_RANDN && y < 0)
    return eng_error(ENG_ERR_ARG, "randn: std must be >= 0, got %g", y);
  return ENG_OK;
}

/* randint: integer bounds, high - low in [1, 2^32], values that fit an integer dtype. */
static eng_status_t check_randint(const eng_op_attrs_t *a) {
  static const double lo[ENG_DTYPE_COUNT] = {
      [ENG_I32] = -2147483648.0, [ENG_I64] = -0x1p63, [ENG_U8] = 0};
  static const double hi[ENG_DTYPE_COUNT] = {
      [ENG_I32] = 2147483647.0, [ENG_I64] = 0x1p63, [ENG_U8] = 255};
  double x = a->f[0], y = a->f[1];
  if (x != floor(x) || y != floor(y) || !(y - x >= 1 && y - x <= 4294967296.0))
    return eng_error(ENG_ERR_ARG,
                     "randint: high - low must be an integer in [1, 2^32] (low %.17g, high %.17g)",
                     x, y);
  if (!eng_dtype_is_float(a->dtype) && (x < lo[a->dtype] || y - 1 > hi[a->dtype]))
    return eng_error(ENG_ERR_ARG, "randint: [%.17g, %.17g) does not fit %s", x, y,
                     eng_dtype_name(a->dtype));
  return ENG_OK;
}

eng_status_t eng_infer_create(eng_op_call_t *call) {
  const eng_op_def_t *def = eng_op_def(call->id);
  const eng_op_attrs_t *a = &call->attrs;
  const char *op = def->name;
  eng_op_meta_t *m = &call->meta[0];
  call->n_out = 1;
  eng_status_t st = eng_shape_check(op, a->i, a->ni);
  if (st) return st;
  if ((int)a->dtype < 0 || a->dtype >= ENG_DTYPE_COUNT)
    return eng_error(ENG_ERR_DTYPE, "%s: invalid dtype %d", op, (int)a->dtype);
  switch (call->id) {
  case ENG_OP_ARANGE:
    if (a->ni != 1)
      return eng_error(ENG_ERR_INTERNAL, "arange: expects a 1-d shape, got %d dims", a->ni);
    break;
  case ENG_OP_EYE:
    if (a->ni != 2)
      return eng_error(ENG_ERR_INTERNAL, "eye: expects a 2-d shape, got %d dims", a->ni);
    break;
  case ENG_OP_RAND:
  case ENG_OP_RANDN:
    st = check_real_random(call, op);
    if (st) return st;
    break;
  case ENG_OP_RANDINT:
    st = check_randint(a);
    if (st) return st;
    break;
  default: return eng_error(ENG_ERR_INTERNAL, "%s: not a creation op", op);
  }
  m->ndim = a->ni;
  for (int d = 0; d < a->ni; d++) m->shape[d] = a->i[d];
  m->dtype = a->dtype;
  return ENG_OK;
}

eng_status_t eng_cpu_arange(const eng_op_call_t *call) {
  const eng_op_attrs_t *a = &call->attrs;
  eng_tensor_t *t = call->out[0];
  eng_kcpu_arange(eng_tensor_data(t), t->dtype, a->i[0], a->f[0], a->f[1], a->f[2],
                  (a->flags & ENG_ATTR_LINSPACE) != 0);
  return ENG_OK;
}

eng_status_t eng_cpu_eye(const eng_op_call_t *call) {
  eng_tensor_t *t = call->out[0];
  eng_kcpu_eye(eng_tensor_data(t), t->dtype, call->attrs.i[0], call->attrs.i[1]);
  return ENG_OK;
}

eng_status_t eng_cpu_rand(const eng_op_call_t *call) {
  const eng_op_attrs_t *a = &call->attrs;
  eng_tensor_t *t = call->out[0];
  eng_kcpu_uniform(eng_tensor_data(t), t->dtype, eng_tensor_numel(t), a->u[0], a->u[1], a->f[0],
                   a->f[1]);
  return ENG_OK;
}

eng_status_t eng_cpu_randn(const eng_op_call_t *call) {
  const eng_op_attrs_t *a = &call->attrs;
  eng_tensor_t *t = call->out[0];
  eng_kcpu_normal(eng_tensor_data(t), t->dtype, eng_tensor_numel(t), a->u[0], a->u[1], a->f[0],
                  a->f[1]);
  return ENG_OK;
}

eng_status_t eng_cpu_randint(const eng_op_call_t *call) {
  const eng_op_attrs_t *a = &call->attrs;
  eng_tensor_t *t = call->out[0];
  eng_kcpu_randint(eng_tensor_data(t), t->dtype, eng_tensor_numel(t), a->u[0], a->u[1],
                   (int64_t)a->f[0], (uint64_t)(a->f[1] - a->f[0]));
  return ENG_OK;
}
