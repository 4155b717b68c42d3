/* In-place elementwise tensor methods for optimizers and users: t:add_, sub_, mul_, div_,
 * addcmul_, lerp_, clamp_. Each runs the registry's binary (or clamp) op with t as the preset
 * output, so it works on every backend; t must be contiguous and the result must keep t's shape
 * and dtype. Each bumps t's version and returns t. */
#include <string.h>

#include "eng_autograd.h"
#include "eng_registry.h"
#include "lua/lua_internal.h"
#include "ops/ops_internal.h"

static const eng_op_id_t BINARY_ID[] = {[ENG_BINARY_ADD] = ENG_OP_ADD, [ENG_BINARY_SUB] = ENG_OP_SUB,
                                        [ENG_BINARY_MUL] = ENG_OP_MUL, [ENG_BINARY_DIV] = ENG_OP_DIV};

/* A number argument becomes a 0-d tensor like t (lt_scalar_like); a tensor is used as it is. The
 * caller releases *tmp. */
static eng_tensor_t *operand(lua_State *L, int idx, const char *op, eng_tensor_t *t,
                             eng_tensor_t **tmp) {
  eng_tensor_t *x = eng_lua_to_tensor(L, idx);
  if (x) return x;
  if (lua_type(L, idx) != LUA_TNUMBER) lt_type_error(L, idx, op, "a tensor or a number");
  if (lt_scalar_like(lua_tonumber(L, idx), t, tmp)) lt_fail(L, op);
  return *tmp;
}

/* t = t (op) x, written into t. The checks come first so that the messages speak of t. */
static eng_status_t binary_into(const char *op, eng_binary_op_t bop, eng_tensor_t *t,
                                eng_tensor_t *x) {
  char st_[192], sx[192];
  eng_dtype_t dt = eng_dtype_promote(t->dtype, x->dtype);
  if (bop == ENG_BINARY_DIV && !eng_dtype_is_float(dt)) dt = ENG_F32;
  if (dt != t->dtype)
    return eng_error(ENG_ERR_DTYPE, "%s: the result would be %s but t is %s (in-place ops keep t's dtype)",
                     op, eng_dtype_name(dt), eng_dtype_name(t->dtype));
  if (!eng_tensor_is_contiguous(t))
    return eng_error(ENG_ERR_LAYOUT, "%s: t %s must be contiguous (in-place ops write it directly)",
                     op, ENG_SHAPE_STR(t, st_));
  const eng_tensor_t *pair[2] = {t, x};
  int64_t shape[ENG_MAX_DIMS];
  int nd = 0;
  eng_status_t st = eng_broadcast_shapes(op, pair, 2, shape, &nd);
  if (st) return st;
  if (nd != t->ndim || memcmp(shape, t->shape, sizeof(int64_t) * (size_t)nd))
    return eng_error(ENG_ERR_SHAPE, "%s: %s does not broadcast to t's shape %s", op,
                     ENG_SHAPE_STR(x, sx), ENG_SHAPE_STR(t, st_));
  eng_tensor_t *xc = NULL;
  if ((st = eng_tensor_to_dtype(x, dt, &xc))) return st;
  eng_tensor_t *in[2] = {t, xc};
  eng_op_call_t call = {.id = BINARY_ID[bop], .n_in = 2, .in = in, .n_out = 1};
  call.out[0] = t;
  st = eng_op_dispatch(&call);
  eng_tensor_release(xc);
  if (!st) eng_tensor_bump_version(t);
  return st;
}

/* Leaves t (argument 1) as the result. */
static int return_t(lua_State *L) {
  lua_settop(L, 1);
  return 1;
}

static int raise_on(lua_State *L, const char *op, eng_status_t st) {
  if (st) lt_fail(L, op);
  return return_t(L);
}

/* t:add_(x[, alpha]) and t:sub_(x[, alpha]): t +-= alpha * x */
static int add_or_sub(lua_State *L, const char *op, eng_binary_op_t bop) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, op), *tmp = NULL, *scaled = NULL;
  int has_alpha = !lua_isnoneornil(L, 3);
  double alpha = lt_opt_num(L, 3, op, 1);
  lt_no_more_args(L, 4, op);
  eng_tensor_t *x = operand(L, 2, op, t, &tmp);
  eng_status_t st = ENG_OK;
  if (has_alpha && alpha != 1) {
    eng_tensor_t *a = NULL;
    if (!(st = lt_scalar_like(alpha, x, &a))) st = eng_op_binary(ENG_BINARY_MUL, x, a, &scaled);
    eng_tensor_release(a);
  }
  if (!st) st = binary_into(op, bop, t, scaled ? scaled : x);
  eng_tensor_release(scaled);
  eng_tensor_release(tmp);
  return raise_on(L, op, st);
}

static int m_add_(lua_State *L) { return add_or_sub(L, "add_", ENG_BINARY_ADD); }
static int m_sub_(lua_State *L) { return add_or_sub(L, "sub_", ENG_BINARY_SUB); }

static int mul_or_div(lua_State *L, const char *op, eng_binary_op_t bop) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, op), *tmp = NULL;
  lt_no_more_args(L, 3, op);
  eng_tensor_t *x = operand(L, 2, op, t, &tmp);
  eng_status_t st = binary_into(op, bop, t, x);
  eng_tensor_release(tmp);
  return raise_on(L, op, st);
}

static int m_mul_(lua_State *L) { return mul_or_div(L, "mul_", ENG_BINARY_MUL); }
static int m_div_(lua_State *L) { return mul_or_div(L, "div_", ENG_BINARY_DIV); }

/* t:addcmul_(a, b[, value]): t += value * a * b */
static int m_addcmul_(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "addcmul_");
  eng_tensor_t *a = eng_lua_check_tensor(L, 2, "addcmul_"), *b = eng_lua_check_tensor(L, 3, "addcmul_");
  double value = lt_opt_num(L, 4, "addcmul_", 1);
  lt_no_more_args(L, 5, "addcmul_");
  eng_tensor_t *ab = NULL, *v = NULL, *vab = NULL;
  eng_status_t st = eng_op_binary(ENG_BINARY_MUL, a, b, &ab);
  if (!st && value != 1 && !(st = lt_scalar_like(value, ab, &v)))
    st = eng_op_binary(ENG_BINARY_MUL, ab, v, &vab);
  if (!st) st = binary_into("addcmul_", ENG_BINARY_ADD, t, vab ? vab : ab);
  eng_tensor_release(ab);
  eng_tensor_release(v);
  eng_tensor_release(vab);
  return raise_on(L, "addcmul_", st);
}

/* t:lerp_(other, weight): t += weight * (other - t); weight a number or a tensor */
static int m_lerp_(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "lerp_"), *other = eng_lua_check_tensor(L, 2, "lerp_");
  eng_tensor_t *tmp = NULL;
  if (lua_isnoneornil(L, 3)) lt_type_error(L, 3, "lerp_", "a tensor or a number (the weight)");
  lt_no_more_args(L, 4, "lerp_");
  eng_tensor_t *w = operand(L, 3, "lerp_", t, &tmp);
  eng_tensor_t *d = NULL, *wd = NULL;
  eng_status_t st = eng_op_binary(ENG_BINARY_SUB, other, t, &d);
  if (!st) st = eng_op_binary(ENG_BINARY_MUL, d, w, &wd);
  if (!st) st = binary_into("lerp_", ENG_BINARY_ADD, t, wd);
  eng_tensor_release(d);
  eng_tensor_release(wd);
  eng_tensor_release(tmp);
  return raise_on(L, "lerp_", st);
}

/* t:clamp_(lo, hi); nil leaves a side open */
static int m_clamp_(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "clamp_");
  int has_lo = !lua_isnoneornil(L, 2), has_hi = !lua_isnoneornil(L, 3);
  double lo = lt_opt_num(L, 2, "clamp_", 0), hi = lt_opt_num(L, 3, "clamp_", 0);
  lt_no_more_args(L, 4, "clamp_");
  if (!has_lo && !has_hi) return lt_raise(L, "clamp_: needs lo, hi or both (got nil for both)");
  char s[192];
  if (!eng_tensor_is_contiguous(t))
    return lt_raise(L, "clamp_: t %s must be contiguous (in-place ops write it directly)",
                    ENG_SHAPE_STR(t, s));
  eng_tensor_t *in[1] = {t};
  eng_op_call_t call = {.id = ENG_OP_CLAMP, .n_in = 1, .in = in, .n_out = 1};
  call.attrs.flags = (has_lo ? ENG_ATTR_HAS_LO : 0) | (has_hi ? ENG_ATTR_HAS_HI : 0);
  call.attrs.f[0] = lo;
  call.attrs.f[1] = hi;
  call.out[0] = t;
  eng_status_t st = eng_op_dispatch(&call);
  if (!st) eng_tensor_bump_version(t);
  return raise_on(L, "clamp_", st);
}

static const lt_reg_t inplace_regs[] = {
    {"add_", m_add_, "t:add_(x[, alpha])",
     "t += alpha * x in place (x a tensor that broadcasts to t, or a number; alpha defaults to 1); "
     "returns t. t must be contiguous and keep its dtype.",
     NULL},
    {"sub_", m_sub_, "t:sub_(x[, alpha])", "t -= alpha * x in place; returns t (as add_).", NULL},
    {"mul_", m_mul_, "t:mul_(x)", "t *= x in place (x a tensor or a number); returns t.", NULL},
    {"div_", m_div_, "t:div_(x)",
     "t /= x in place (x a tensor or a number); returns t. t must be floating.", NULL},
    {"addcmul_", m_addcmul_, "t:addcmul_(a, b[, value])",
     "t += value * a * b in place (value defaults to 1); returns t.", NULL},
    {"lerp_", m_lerp_, "t:lerp_(other, weight)",
     "t += weight * (other - t) in place (weight a number or a tensor); returns t.", NULL},
    {"clamp_", m_clamp_, "t:clamp_(lo, hi)",
     "Clamps t to [lo, hi] in place (nil leaves a side open); returns t.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_inplace(lua_State *L, int methods) { lt_register(L, methods, 0, inplace_regs); }
