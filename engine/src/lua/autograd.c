/* Autograd in Lua: requires_grad, backward, grad, detach, no_grad and engine.grad. */
#include "eng_autograd.h"
#include "lua/lua_internal.h"

static int m_requires_grad(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "requires_grad");
  if (lua_isnoneornil(L, 2)) {
    lua_pushboolean(L, eng_tensor_requires_grad(t));
    return 1;
  }
  if (!lua_isboolean(L, 2)) return lt_type_error(L, 2, "requires_grad", "a boolean");
  if (eng_tensor_set_requires_grad(t, lua_toboolean(L, 2)) != ENG_OK) return lt_fail(L, "requires_grad");
  lua_settop(L, 1);
  return 1;
}

static int m_grad(lua_State *L) {
  eng_tensor_t *g = eng_tensor_grad(eng_lua_check_tensor(L, 1, "grad"));
  if (!g) {
    lua_pushnil(L);
    return 1;
  }
  eng_tensor_retain(g);
  eng_lua_push_tensor(L, g);
  return 1;
}

static int m_set_grad(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "set_grad");
  eng_tensor_t *g = lua_isnoneornil(L, 2) ? NULL : eng_lua_check_tensor(L, 2, "set_grad");
  if (eng_tensor_set_grad(t, g) != ENG_OK) return lt_fail(L, "set_grad");
  lua_settop(L, 1);
  return 1;
}

static int m_detach(lua_State *L) {
  eng_tensor_t *out = NULL;
  return lt_push_result(L, "detach", eng_tensor_detach(eng_lua_check_tensor(L, 1, "detach"), &out), &out);
}

static int m_is_leaf(lua_State *L) {
  lua_pushboolean(L, eng_tensor_is_leaf(eng_lua_check_tensor(L, 1, "is_leaf")));
  return 1;
}

static int m_grad_fn(lua_State *L) {
  const char *name = eng_tensor_grad_fn_name(eng_lua_check_tensor(L, 1, "grad_fn"));
  if (name) lua_pushstring(L, name);
  else lua_pushnil(L);
  return 1;
}

/* retain_graph from an options table at idx (absent: false). */
static int retain_opt(lua_State *L, int idx, const char *op) {
  if (lua_isnoneornil(L, idx)) return 0;
  static const char *const allowed[] = {"retain_graph", NULL};
  lt_check_opts(L, idx, op, allowed);
  lua_getfield(L, idx, "retain_graph");
  int r = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return r;
}

static int m_backward(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "backward");
  eng_tensor_t *g = NULL;
  int opts = 2;
  if (eng_lua_to_tensor(L, 2)) {
    g = eng_lua_to_tensor(L, 2);
    opts = 3;
  } else if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2)) {
    return lt_type_error(L, 2, "backward", "a gradient tensor or an options table");
  }
  int retain = retain_opt(L, opts, "backward");
  lt_no_more_args(L, opts + 1, "backward");
  if (eng_backward(&t, &g, 1, retain) != ENG_OK) return lt_fail(L, "backward");
  return 0;
}

/* Runs the function at 1 with grad mode `on`, restoring the mode even when it raises. */
static int with_grad_mode(lua_State *L, int on) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int was = eng_grad_set_enabled(on);
  int n = lua_gettop(L) - 1;
  int base = lua_gettop(L) - n - 1;
  int rc = lua_pcall(L, n, LUA_MULTRET, 0);
  eng_grad_set_enabled(was);
  if (rc != 0) return lua_error(L);
  return lua_gettop(L) - base;
}

static int e_no_grad(lua_State *L) { return with_grad_mode(L, 0); }
static int e_enable_grad(lua_State *L) { return with_grad_mode(L, 1); }

static int e_is_grad_enabled(lua_State *L) {
  lua_pushboolean(L, eng_grad_enabled());
  return 1;
}

static int e_set_grad_enabled(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  lua_pushboolean(L, eng_grad_set_enabled(lua_toboolean(L, 1)));
  return 1;
}

/* The tensors at idx: one tensor or a list of them, in an array owned by the Lua GC (a userdata
 * left on the stack), so raising an error leaks nothing. Entries are borrowed. */
static eng_tensor_t **tensor_list(lua_State *L, int idx, const char *op, const char *what, int *n, int allow_nil) {
  if (eng_lua_to_tensor(L, idx)) {
    eng_tensor_t **v = lua_newuserdata(L, sizeof *v);
    v[0] = eng_lua_to_tensor(L, idx);
    *n = 1;
    return v;
  }
  if (!lua_istable(L, idx)) {
    lt_type_error(L, idx, op, what);
    return NULL;
  }
  int len = (int)lua_objlen(L, idx);
  if (len == 0 && !allow_nil) lt_raise(L, "%s: %s is an empty list", op, what);
  eng_tensor_t **v = lua_newuserdata(L, sizeof *v * (size_t)(len ? len : 1));
  for (int k = 0; k < len; k++) {
    lua_rawgeti(L, idx, k + 1);
    v[k] = eng_lua_to_tensor(L, -1);
    int bad = !v[k] && !(allow_nil && lua_isnil(L, -1));
    lua_pop(L, 1);
    if (bad) lt_raise(L, "%s: entry %d of %s is not a tensor", op, k + 1, what);
  }
  *n = len;
  return v;
}

/* engine.grad(outputs, inputs[, grad_outputs][, {retain_graph =}]) */
static int e_grad(lua_State *L) {
  int n_out, n_in, n_g = 0, opts = 3;
  lua_settop(L, 4); /* the arrays below are pushed after the arguments */
  eng_tensor_t **outs = tensor_list(L, 1, "grad", "outputs (a tensor or a list of tensors)", &n_out, 0);
  eng_tensor_t **ins = tensor_list(L, 2, "grad", "inputs (a tensor or a list of tensors)", &n_in, 0);
  eng_tensor_t **gs = NULL;
  int single = eng_lua_to_tensor(L, 2) != NULL;
  if (eng_lua_to_tensor(L, 3) || (lua_istable(L, 3) && lua_objlen(L, 3) > 0)) {
    gs = tensor_list(L, 3, "grad", "grad_outputs", &n_g, 1);
    opts = 4;
    if (n_g != n_out) return lt_raise(L, "grad: %d grad_outputs for %d outputs", n_g, n_out);
  }
  int retain = retain_opt(L, opts, "grad");
  eng_tensor_t **res = lua_newuserdata(L, sizeof *res * (size_t)n_in);
  if (eng_grad(outs, gs, n_out, ins, n_in, retain, res) != ENG_OK) return lt_fail(L, "grad");
  if (single) {
    if (res[0]) eng_lua_push_tensor(L, res[0]);
    else lua_pushnil(L);
    return 1;
  }
  /* pushing cannot fail half-way in a way that leaks: each push takes its reference */
  lua_createtable(L, n_in, 0);
  for (int k = 0; k < n_in; k++) {
    if (res[k]) eng_lua_push_tensor(L, res[k]);
    else lua_pushboolean(L, 0); /* no dependence: false keeps the list's length */
    lua_rawseti(L, -2, k + 1);
  }
  return 1;
}

static const lt_reg_t method_regs[] = {
    {"requires_grad", m_requires_grad, "x:requires_grad([flag]) -> x | boolean",
     "With a boolean: marks a leaf tensor (floating dtypes) as needing gradients and returns it. Without: "
     "whether x requires grad (leaves so marked, and results of recorded ops on them).",
     NULL},
    {"grad", m_grad, "x:grad() -> tensor | nil",
     "The gradient accumulated into the leaf x by backward calls (nil before any). Same shape, dtype and "
     "device as x.",
     NULL},
    {"set_grad", m_set_grad, "x:set_grad(g | nil) -> x",
     "Replaces x's accumulated gradient (nil clears it, as zero_grad does).", NULL},
    {"backward", m_backward, "y:backward([grad][, {retain_graph = false}])",
     "Adds dy/dx into x:grad() for every leaf x that y depends on and that requires grad. grad is the "
     "gradient of y (default 1, only for one-element y). The graph's saved tensors are freed unless "
     "retain_graph is set.",
     NULL},
    {"detach", m_detach, "x:detach() -> tensor",
     "The same data (shared storage) as a new tensor that does not require grad.", NULL},
    {"is_leaf", m_is_leaf, "x:is_leaf() -> boolean",
     "True unless x was made by a recorded op (its gradient then flows on to its inputs).", NULL},
    {"grad_fn", m_grad_fn, "x:grad_fn() -> string | nil",
     "The name of the op that made x (for a tensor in a graph), else nil.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static const lt_reg_t engine_regs[] = {
    {"no_grad", e_no_grad, "engine.no_grad(fn, ...) -> fn's results",
     "Runs fn(...) with autograd recording off (optimizer steps, evaluation, initialisation).", NULL},
    {"enable_grad", e_enable_grad, "engine.enable_grad(fn, ...) -> fn's results",
     "Runs fn(...) with autograd recording on.", NULL},
    {"is_grad_enabled", e_is_grad_enabled, "engine.is_grad_enabled() -> boolean",
     "Whether ops are recorded for autograd now (on by default).", NULL},
    {"set_grad_enabled", e_set_grad_enabled, "engine.set_grad_enabled(flag) -> previous",
     "Turns recording on or off for what follows; returns the previous setting.", NULL},
    {"grad", e_grad, "engine.grad(outputs, inputs[, grad_outputs][, {retain_graph =}]) -> grads",
     "The gradients of outputs (a tensor or a list) with respect to inputs (a tensor or a list), without "
     "touching any .grad. Returns a tensor for a tensor input, else a list where an input the outputs do "
     "not depend on gets false.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_autograd(lua_State *L, int engine, int methods) {
  lt_register(L, methods, 0, method_regs);
  lt_register(L, engine, 0, engine_regs);
}
