/* The engine.F backward kernels (softmax_backward, rms_norm_backward, layer_norm_backward,
 * cross_entropy_backward) and the fused add_rms_norm: what autograd runs, callable by hand to
 * check or build custom gradients. */
#include <math.h>

#include "lua/lua_internal.h"

static eng_tensor_t *opt_tensor(lua_State *L, int idx, const char *op) {
  return lua_isnoneornil(L, idx) ? NULL : eng_lua_check_tensor(L, idx, op);
}

/* Pushes the n tensors of outs (NULL as nil) after st succeeded; raises otherwise. */
static int push_results(lua_State *L, const char *op, eng_status_t st, eng_tensor_t **outs, int n) {
  if (st != ENG_OK) return lt_fail(L, op);
  for (int k = 0; k < n; k++) {
    if (outs[k])
      eng_lua_push_tensor(L, outs[k]);
    else
      lua_pushnil(L);
  }
  return n;
}

static int f_softmax_backward(lua_State *L) {
  const char *op = "softmax_backward";
  eng_tensor_t *gy = eng_lua_check_tensor(L, 1, op), *y = eng_lua_check_tensor(L, 2, op), *gx = NULL;
  int64_t dim = lt_check_int(L, 3, op);
  if (!lua_isnoneornil(L, 4) && lua_type(L, 4) != LUA_TBOOLEAN)
    lt_type_error(L, 4, op, "a boolean (log)");
  int log = lua_toboolean(L, 4);
  lt_no_more_args(L, 5, op);
  return lt_push_result(L, op, eng_op_softmax_backward(gy, y, dim, log, &gx), &gx);
}

static int f_rms_norm_backward(lua_State *L) {
  const char *op = "rms_norm_backward";
  eng_tensor_t *gy = eng_lua_check_tensor(L, 1, op), *x = eng_lua_check_tensor(L, 2, op);
  eng_tensor_t *w = opt_tensor(L, 3, op), *outs[2] = {NULL, NULL};
  double eps = lt_opt_num(L, 4, op, 1e-6);
  lt_no_more_args(L, 5, op);
  return push_results(L, op, eng_op_rms_norm_backward(gy, x, w, eps, &outs[0], &outs[1]), outs, 2);
}

static int f_layer_norm_backward(lua_State *L) {
  const char *op = "layer_norm_backward";
  eng_tensor_t *gy = eng_lua_check_tensor(L, 1, op), *x = eng_lua_check_tensor(L, 2, op);
  eng_tensor_t *w = opt_tensor(L, 3, op), *b = opt_tensor(L, 4, op), *outs[3] = {NULL, NULL, NULL};
  double eps = lt_opt_num(L, 5, op, 1e-5);
  lt_no_more_args(L, 6, op);
  return push_results(L, op,
                      eng_op_layer_norm_backward(gy, x, w, b, eps, &outs[0], &outs[1], &outs[2]),
                      outs, 3);
}

/* The {ignore_index = } option at idx (default -100, as cross_entropy's). */
static int64_t ignore_index_opt(lua_State *L, int idx, const char *op) {
  if (lua_isnoneornil(L, idx)) return -100;
  static const char *const allowed[] = {"ignore_index", NULL};
  if (lua_type(L, idx) != LUA_TTABLE) lt_type_error(L, idx, op, "an options table {ignore_index=}");
  lt_check_opts(L, idx, op, allowed);
  lua_getfield(L, idx, "ignore_index");
  int64_t v = -100;
  if (!lua_isnil(L, -1)) {
    double d = lua_tonumber(L, -1);
    if (lua_type(L, -1) != LUA_TNUMBER || d != floor(d) || fabs(d) > 0x1p62)
      lt_raise(L, "%s: option ignore_index must be an integer, got %s", op,
               lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
    v = (int64_t)d;
  }
  lua_pop(L, 1);
  return v;
}

/* cross_entropy_backward(logits, targets, gloss[, opts]); gloss is a one-element tensor (or a
 * number, made into a 0-d tensor on the logits' device). */
static int f_cross_entropy_backward(lua_State *L) {
  const char *op = "cross_entropy_backward";
  eng_tensor_t *logits = eng_lua_check_tensor(L, 1, op), *targets = eng_lua_check_tensor(L, 2, op);
  eng_tensor_t *gloss = NULL, *out = NULL;
  if (lua_type(L, 3) == LUA_TNUMBER) {
    eng_tensor_t *g = NULL;
    if (lt_scalar_like(lua_tonumber(L, 3), logits, &g)) return lt_fail(L, op);
    eng_lua_push_tensor(L, g); /* the GC owns it */
    lua_replace(L, 3);
  }
  gloss = eng_lua_check_tensor(L, 3, op);
  int64_t ignore = ignore_index_opt(L, 4, op);
  lt_no_more_args(L, 5, op);
  return lt_push_result(L, op, eng_op_cross_entropy_backward(logits, targets, gloss, ignore, &out),
                        &out);
}

static int f_add_rms_norm(lua_State *L) {
  const char *op = "add_rms_norm";
  eng_tensor_t *x = eng_lua_check_tensor(L, 1, op), *res = opt_tensor(L, 2, op);
  eng_tensor_t *w = opt_tensor(L, 3, op), *outs[2] = {NULL, NULL};
  double eps = lt_opt_num(L, 4, op, 1e-6);
  lt_no_more_args(L, 5, op);
  return push_results(L, op, eng_op_add_rms_norm(x, res, w, eps, &outs[0], &outs[1]), outs, 2);
}

static const lt_reg_t regs[] = {
    {"softmax_backward", f_softmax_backward, "engine.F.softmax_backward(gy, y, dim[, log])",
     "The gradient of softmax (log_softmax when log is true) along dim, from the upstream gradient "
     "gy and the forward's OUTPUT y: y * (gy - sum(gy * y)), or gy - exp(y) * sum(gy).",
     NULL},
    {"rms_norm_backward", f_rms_norm_backward,
     "engine.F.rms_norm_backward(gy, x[, weight][, eps]) -> gx, gweight",
     "Gradients of F.rms_norm(x, weight, eps) (eps defaults to 1e-6): gx in x's dtype, gweight in "
     "weight's (nil without a weight). gy may have another float dtype than x (bf16 against an "
     "f32 residual stream); gweight sums over all rows reproducibly.",
     NULL},
    {"layer_norm_backward", f_layer_norm_backward,
     "engine.F.layer_norm_backward(gy, x[, weight][, bias][, eps]) -> gx, gweight, gbias",
     "Gradients of F.layer_norm(x, weight, bias, eps) (eps defaults to 1e-5); gweight and gbias "
     "are nil where weight or bias is. Dtypes as for rms_norm_backward.",
     NULL},
    {"cross_entropy_backward", f_cross_entropy_backward,
     "engine.F.cross_entropy_backward(logits, targets, gloss[, {ignore_index = -100}])",
     "The gradient of F.cross_entropy(logits, targets) times gloss (a one-element tensor read on "
     "its device, or a number): (softmax(logits) - onehot(targets)) * gloss / n_valid, 0 on "
     "ignored rows, in the logits' dtype.",
     NULL},
    {"add_rms_norm", f_add_rms_norm,
     "engine.F.add_rms_norm(x, residual, weight[, eps]) -> y, residual_out",
     "The pre-norm block entry: residual_out = residual + x kept in f32 (f64 for f64; residual "
     "may be nil, or f32 or x's dtype), y = F.rms_norm(residual_out, weight, eps) in x's dtype; "
     "weight may be nil, eps defaults to 1e-6. One pass over each row on CUDA.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_functional_backward(lua_State *L, int F) { lt_register(L, F, 0, regs); }
