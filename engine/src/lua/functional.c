/* The elementwise and reduction ops, each one C function stored both as a tensor method and in
 * engine.F (so help(x.tanh) and help(engine.F.tanh) find the same doc): unary and binary ops,
 * clamp, where, sum/mean/max/min/var/std, argmax, softmax, log_softmax. */
#include <stdio.h>

#include "eng_registry.h"
#include "lua/lua_internal.h"

/* upvalue 1: the eng_unary_op_t */
static int f_unary(lua_State *L) {
  eng_unary_op_t op = (eng_unary_op_t)lua_tointeger(L, lua_upvalueindex(1));
  const char *name = eng_unary_name(op);
  eng_tensor_t *x = eng_lua_check_tensor(L, 1, name), *out = NULL;
  lt_no_more_args(L, 2, name);
  return lt_push_result(L, name, eng_op_unary(op, x, &out), &out);
}

/* upvalue 1: the eng_binary_op_t */
static int f_binary(lua_State *L) {
  eng_binary_op_t op = (eng_binary_op_t)lua_tointeger(L, lua_upvalueindex(1));
  lt_no_more_args(L, 3, eng_binary_name(op));
  return lt_binary(L, op);
}

static int f_clamp(lua_State *L) {
  eng_tensor_t *x = eng_lua_check_tensor(L, 1, "clamp"), *out = NULL;
  int has_lo = !lua_isnoneornil(L, 2), has_hi = !lua_isnoneornil(L, 3);
  double lo = lt_opt_num(L, 2, "clamp", 0), hi = lt_opt_num(L, 3, "clamp", 0);
  lt_no_more_args(L, 4, "clamp");
  if (!has_lo && !has_hi) return lt_raise(L, "clamp: needs lo, hi or both (got nil for both)");
  return lt_push_result(L, "clamp", eng_op_clamp(x, has_lo, lo, has_hi, hi, &out), &out);
}

/* where(cond, a, b) with the arguments at stack slots ci, ai, bi; a and b may be numbers. */
static int where_at(lua_State *L, int ci, int ai, int bi) {
  eng_tensor_t *c = eng_lua_check_tensor(L, ci, "where");
  eng_tensor_t *a = eng_lua_to_tensor(L, ai), *b = eng_lua_to_tensor(L, bi);
  if (!a && lua_type(L, ai) != LUA_TNUMBER) lt_type_error(L, ai, "where", "a tensor or number");
  if (!b && lua_type(L, bi) != LUA_TNUMBER) lt_type_error(L, bi, "where", "a tensor or number");
  eng_tensor_t *ta = NULL, *tb = NULL, *out = NULL;
  eng_status_t st = ENG_OK;
  int64_t no_shape[1] = {0};
  if (!a && !b) { /* two numbers: f32 values where the condition lives */
    st = eng_tensor_full(no_shape, 0, lua_tonumber(L, ai), ENG_F32, eng_tensor_device(c), &ta);
    if (st == ENG_OK)
      st = eng_tensor_full(no_shape, 0, lua_tonumber(L, bi), ENG_F32, eng_tensor_device(c), &tb);
  } else if (!a) {
    st = lt_scalar_like(lua_tonumber(L, ai), b, &ta);
  } else if (!b) {
    st = lt_scalar_like(lua_tonumber(L, bi), a, &tb);
  }
  if (st == ENG_OK) st = eng_op_where(c, a ? a : ta, b ? b : tb, &out);
  eng_tensor_release(ta);
  eng_tensor_release(tb);
  return lt_push_result(L, "where", st, &out);
}

static int f_where(lua_State *L) {
  lt_no_more_args(L, 4, "where");
  return where_at(L, 1, 2, 3);
}

static int m_where(lua_State *L) {
  lt_no_more_args(L, 4, "where");
  return where_at(L, 2, 1, 3);
}

/* A table at idx with string keys and no array part: an options table, not a list of dims. */
static int is_options(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE || lua_objlen(L, idx) != 0) return 0;
  lua_pushnil(L);
  if (!lua_next(L, idx)) return 0;
  lua_pop(L, 2);
  return 1;
}

/* x:sum([dim | {dims}][, keepdim][, {correction = n}]); upvalue 1: the eng_reduce_op_t */
static int f_reduce(lua_State *L) {
  eng_reduce_op_t op = (eng_reduce_op_t)lua_tointeger(L, lua_upvalueindex(1));
  const char *name = eng_reduce_name(op);
  int has_correction = op == ENG_REDUCE_VAR || op == ENG_REDUCE_STD;
  eng_tensor_t *x = eng_lua_check_tensor(L, 1, name), *out = NULL;
  int64_t dims[ENG_MAX_DIMS];
  int ndims = 0, arg = 2, keepdim = 0, correction = 1;
  if (lua_type(L, arg) == LUA_TNUMBER) {
    dims[ndims++] = lt_check_int(L, arg++, name);
  } else if (lua_type(L, arg) == LUA_TTABLE && !is_options(L, arg)) {
    ndims = lt_int_list(L, arg, name, "dims", dims, ENG_MAX_DIMS, &arg);
  } else if (lua_isnil(L, arg) && lua_gettop(L) > arg) {
    arg++; /* an explicit nil: all dims */
  }
  if (lua_type(L, arg) == LUA_TBOOLEAN)
    keepdim = lua_toboolean(L, arg++);
  else if (lua_isnil(L, arg) && lua_gettop(L) > arg)
    arg++;
  if (lua_type(L, arg) == LUA_TTABLE) {
    static const char *const with_correction[] = {"correction", NULL};
    static const char *const none[] = {NULL};
    lt_check_opts(L, arg, name, has_correction ? with_correction : none);
    lua_getfield(L, arg, "correction");
    if (!lua_isnil(L, -1)) {
      double c = lua_tonumber(L, -1);
      if (lua_type(L, -1) != LUA_TNUMBER || c != (int)c || c < 0)
        lt_raise(L, "%s: option correction must be a non-negative integer, got %s", name,
                 lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
      correction = (int)c;
    }
    lua_pop(L, 1);
    arg++;
  }
  lt_no_more_args(L, arg, name);
  return lt_push_result(L, name, eng_op_reduce(op, x, dims, ndims, keepdim, correction, &out),
                        &out);
}

static int f_argmax(lua_State *L) {
  eng_tensor_t *x = eng_lua_check_tensor(L, 1, "argmax"), *out = NULL;
  int flatten = lua_isnoneornil(L, 2);
  int64_t dim = flatten ? 0 : lt_check_int(L, 2, "argmax");
  if (!lua_isnoneornil(L, 3) && lua_type(L, 3) != LUA_TBOOLEAN)
    lt_type_error(L, 3, "argmax", "a boolean (keepdim)");
  int keepdim = lua_toboolean(L, 3);
  lt_no_more_args(L, 4, "argmax");
  return lt_push_result(L, "argmax", eng_op_argmax(x, dim, flatten, keepdim, &out), &out);
}

typedef eng_status_t (*dim_op_fn)(eng_tensor_t *, int64_t, eng_tensor_t **);

static int along_dim(lua_State *L, const char *name, dim_op_fn fn) {
  eng_tensor_t *x = eng_lua_check_tensor(L, 1, name), *out = NULL;
  int64_t dim = lt_opt_int(L, 2, name, -1);
  lt_no_more_args(L, 3, name);
  return lt_push_result(L, name, fn(x, dim, &out), &out);
}

static int f_softmax(lua_State *L) { return along_dim(L, "softmax", eng_op_softmax); }
static int f_log_softmax(lua_State *L) { return along_dim(L, "log_softmax", eng_op_log_softmax); }

static const lt_reg_t shared_regs[] = {
    {"clamp", f_clamp, "x:clamp(lo, hi)  |  engine.F.clamp(x, lo, hi)",
     "Clamps to [lo, hi]; nil leaves that side open.", NULL},
    {"argmax", f_argmax, "x:argmax([dim][, keepdim])  |  engine.F.argmax(x[, dim][, keepdim])",
     "The index (i64) of the largest value along dim, or in the flattened tensor when dim is nil.",
     NULL},
    {"softmax", f_softmax, "x:softmax([dim])  |  engine.F.softmax(x[, dim])",
     "exp(x) / sum(exp(x)) along dim (default -1, the last).", NULL},
    {"log_softmax", f_log_softmax, "x:log_softmax([dim])  |  engine.F.log_softmax(x[, dim])",
     "log(softmax(x)) along dim (default -1), computed stably.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* Stores the function on top in F and methods under name (pops it). */
static void set_both(lua_State *L, int F, int methods, const char *name) {
  lua_pushvalue(L, -1);
  lua_setfield(L, F, name);
  lua_setfield(L, methods, name);
}

void lt_open_functional(lua_State *L, int F, int methods) {
  char sig[192];
  for (int op = 0; op < ENG_UNARY_COUNT; op++) {
    const char *name = eng_unary_name((eng_unary_op_t)op);
    snprintf(sig, sizeof sig, "x:%s()  |  engine.F.%s(x)", name, name);
    lua_pushinteger(L, op);
    lt_push_documented(L, f_unary, 1, sig, NULL, name);
    set_both(L, F, methods, name);
  }
  static const char *const infix[ENG_BINARY_COUNT] = {[ENG_BINARY_ADD] = "  |  a + b",
                                                      [ENG_BINARY_SUB] = "  |  a - b",
                                                      [ENG_BINARY_MUL] = "  |  a * b",
                                                      [ENG_BINARY_DIV] = "  |  a / b",
                                                      [ENG_BINARY_POW] = "  |  a ^ b"};
  for (int op = 0; op < ENG_BINARY_COUNT; op++) {
    const char *name = eng_binary_name((eng_binary_op_t)op);
    snprintf(sig, sizeof sig, "x:%s(y)  |  engine.F.%s(a, b)%s", name, name,
             infix[op] ? infix[op] : "");
    char desc[192];
    snprintf(desc, sizeof desc,
             "%s. Either side may be a Lua number (made a 0-d tensor of the other "
             "side's dtype; f32 when a fraction meets an integer tensor).",
             eng_op_find(name, NULL)->doc);
    lua_pushinteger(L, op);
    lt_push_documented(L, f_binary, 1, sig, desc, NULL);
    set_both(L, F, methods, name);
  }
  for (int op = 0; op < ENG_REDUCE_COUNT; op++) {
    const char *name = eng_reduce_name((eng_reduce_op_t)op);
    int corr = op == ENG_REDUCE_VAR || op == ENG_REDUCE_STD;
    snprintf(sig, sizeof sig, "x:%s([dim | {dims}][, keepdim]%s)  |  engine.F.%s(x, ...)", name,
             corr ? "[, {correction = 1}]" : "", name);
    lua_pushinteger(L, op);
    lt_push_documented(L, f_reduce, 1, sig, NULL, name);
    set_both(L, F, methods, name);
  }
  lt_register(L, F, methods, shared_regs);
  lt_push_documented(L, m_where, 0, "x:where(cond, other)",
                     "Elementwise cond ~= 0 and x or other (other may be a number): "
                     "engine.where(cond, x, other).",
                     NULL);
  lua_setfield(L, methods, "where");
  lt_push_documented(
      L, f_where, 0, "engine.where(cond, a, b)  |  engine.F.where(cond, a, b)",
      "Elementwise cond ~= 0 and a or b, broadcasting all three; a and b may be numbers.", NULL);
  lua_setfield(L, F, "where");
}
