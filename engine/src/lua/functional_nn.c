/* The engine.F ops of neural-network layers and indexing: matmul, linear, layer_norm, rms_norm,
 * embedding, cross_entropy, cat, stack, index_select, gather. matmul, index_select and gather are
 * tensor methods too. */
#include <math.h>
#include <string.h>

#include "lua/lua_internal.h"

/* A tensor or nil (optional weights). */
static eng_tensor_t *opt_tensor(lua_State *L, int idx, const char *op) {
  return lua_isnoneornil(L, idx) ? NULL : eng_lua_check_tensor(L, idx, op);
}

static int f_matmul(lua_State *L) {
  eng_tensor_t *a = eng_lua_check_tensor(L, 1, "matmul"), *b = eng_lua_check_tensor(L, 2, "matmul");
  lt_no_more_args(L, 3, "matmul");
  eng_tensor_t *out = NULL;
  return lt_push_result(L, "matmul", eng_op_matmul(a, b, &out), &out);
}

/* The act option of linear: nil/"none", "relu" or "gelu" (the tanh approximation). */
static int linear_act(lua_State *L, int idx) {
  static const char *const allowed[] = {"act", NULL};
  lt_check_opts(L, idx, "linear", allowed);
  lua_getfield(L, idx, "act");
  int act = ENG_ACT_NONE;
  if (!lua_isnil(L, -1)) {
    const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (!name)
      lt_raise(L, "linear: option act must be a string, got %s", luaL_typename(L, -1));
    if (strcmp(name, "relu") == 0) act = ENG_ACT_RELU;
    else if (strcmp(name, "gelu") == 0) act = ENG_ACT_GELU_TANH;
    else if (strcmp(name, "none") != 0)
      lt_raise(L, "linear: unknown act '%s' (expected \"relu\", \"gelu\" or \"none\")", name);
  }
  lua_pop(L, 1);
  return act;
}

/* linear(x, W[, b][, opts]); the options table may also take b's place. */
static int f_linear(lua_State *L) {
  eng_tensor_t *x = eng_lua_check_tensor(L, 1, "linear"), *w = eng_lua_check_tensor(L, 2, "linear");
  int opts = lua_type(L, 3) == LUA_TTABLE ? 3 : 4;
  eng_tensor_t *b = opts == 3 ? NULL : opt_tensor(L, 3, "linear");
  int act = ENG_ACT_NONE;
  if (lua_type(L, opts) == LUA_TTABLE) act = linear_act(L, opts);
  else if (!lua_isnoneornil(L, opts))
    lt_type_error(L, opts, "linear", "an options table {act=}");
  lt_no_more_args(L, opts + 1, "linear");
  eng_tensor_t *out = NULL;
  return lt_push_result(L, "linear", eng_op_linear(x, w, b, act, &out), &out);
}

static int f_layer_norm(lua_State *L) {
  eng_tensor_t *x = eng_lua_check_tensor(L, 1, "layer_norm");
  eng_tensor_t *w = opt_tensor(L, 2, "layer_norm"), *b = opt_tensor(L, 3, "layer_norm"),
               *out = NULL;
  double eps = lt_opt_num(L, 4, "layer_norm", 1e-5);
  lt_no_more_args(L, 5, "layer_norm");
  return lt_push_result(L, "layer_norm", eng_op_layer_norm(x, w, b, eps, &out), &out);
}

static int f_rms_norm(lua_State *L) {
  eng_tensor_t *x = eng_lua_check_tensor(L, 1, "rms_norm");
  eng_tensor_t *w = opt_tensor(L, 2, "rms_norm"), *out = NULL;
  double eps = lt_opt_num(L, 3, "rms_norm", 1e-6);
  lt_no_more_args(L, 4, "rms_norm");
  return lt_push_result(L, "rms_norm", eng_op_rms_norm(x, w, eps, &out), &out);
}

static int f_embedding(lua_State *L) {
  eng_tensor_t *ids = eng_lua_check_tensor(L, 1, "embedding");
  eng_tensor_t *w = eng_lua_check_tensor(L, 2, "embedding"), *out = NULL;
  lt_no_more_args(L, 3, "embedding");
  return lt_push_result(L, "embedding", eng_op_embedding(ids, w, &out), &out);
}

static int f_cross_entropy(lua_State *L) {
  eng_tensor_t *logits = eng_lua_check_tensor(L, 1, "cross_entropy");
  eng_tensor_t *targets = eng_lua_check_tensor(L, 2, "cross_entropy"), *out = NULL;
  int64_t ignore_index = -100;
  if (!lua_isnoneornil(L, 3)) {
    static const char *const allowed[] = {"ignore_index", NULL};
    if (lua_type(L, 3) != LUA_TTABLE)
      lt_type_error(L, 3, "cross_entropy", "an options table {ignore_index=}");
    lt_check_opts(L, 3, "cross_entropy", allowed);
    lua_getfield(L, 3, "ignore_index");
    if (!lua_isnil(L, -1)) {
      double v = lua_tonumber(L, -1);
      if (lua_type(L, -1) != LUA_TNUMBER || v != floor(v) || fabs(v) > 0x1p62)
        lt_raise(L, "cross_entropy: option ignore_index must be an integer, got %s",
                 lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
      ignore_index = (int64_t)v;
    }
    lua_pop(L, 1);
  }
  lt_no_more_args(L, 4, "cross_entropy");
  return lt_push_result(L, "cross_entropy",
                        eng_op_cross_entropy(logits, targets, ignore_index, &out), &out);
}

typedef eng_status_t (*join_fn)(eng_tensor_t *const *, int, int64_t, eng_tensor_t **);

/* cat/stack(list, dim): the list's tensors go in a GC-owned buffer. */
static int join(lua_State *L, const char *op, join_fn fn) {
  if (lua_type(L, 1) != LUA_TTABLE) lt_type_error(L, 1, op, "a list of tensors");
  int64_t dim = lt_opt_int(L, 2, op, 0);
  lt_no_more_args(L, 3, op);
  int n = (int)lua_objlen(L, 1);
  if (n == 0) return lt_raise(L, "%s: needs at least one tensor, got an empty list", op);
  eng_tensor_t **ts = (eng_tensor_t **)lua_newuserdata(L, sizeof(eng_tensor_t *) * (size_t)n);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 1, i + 1);
    ts[i] = eng_lua_to_tensor(L, -1);
    if (!ts[i])
      lt_raise(L, "%s: element %d of the list must be a tensor, got %s", op, i + 1,
               luaL_testudata(L, -1, LT_TENSOR_MT) ? "a freed tensor" : luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  eng_tensor_t *out = NULL;
  return lt_push_result(L, op, fn(ts, n, dim, &out), &out);
}

static int f_cat(lua_State *L) { return join(L, "cat", eng_op_cat); }
static int f_stack(lua_State *L) { return join(L, "stack", eng_op_stack); }

typedef eng_status_t (*index_fn)(eng_tensor_t *, int64_t, eng_tensor_t *, eng_tensor_t **);

static int f_index_select(lua_State *L) {
  eng_tensor_t *x = eng_lua_check_tensor(L, 1, "index_select");
  int64_t dim = lt_check_int(L, 2, "index_select");
  lt_no_more_args(L, 4, "index_select");
  eng_tensor_t *idx = lt_index_arg(L, 3, "index_select"), *out = NULL;
  return lt_push_result(L, "index_select", eng_op_index_select(x, dim, idx, &out), &out);
}

static int f_gather(lua_State *L) {
  eng_tensor_t *x = eng_lua_check_tensor(L, 1, "gather");
  int64_t dim = lt_check_int(L, 2, "gather");
  eng_tensor_t *idx = eng_lua_check_tensor(L, 3, "gather"), *out = NULL;
  lt_no_more_args(L, 4, "gather");
  return lt_push_result(L, "gather", eng_op_gather(x, dim, idx, &out), &out);
}

static const lt_reg_t shared_regs[] = {
    {"matmul", f_matmul, "x:matmul(y)  |  engine.matmul(a, b)  |  engine.F.matmul(a, b)",
     "Matrix product with torch.matmul semantics: 1-D, 2-D, and batched with broadcast batch dims.",
     NULL},
    {"index_select", f_index_select,
     "x:index_select(dim, index)  |  engine.F.index_select(x, dim, index)",
     "Entries along dim picked by a 1-D integer index (a tensor or a Lua array of 0-based "
     "integers).",
     NULL},
    {"gather", f_gather, "x:gather(dim, index)  |  engine.F.gather(x, dim, index)",
     "torch.gather: out[i][j] = x[index[i][j]][j] for dim 0 (index is an integer tensor, 0-based).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static const lt_reg_t f_regs[] = {
    {"linear", f_linear, "engine.F.linear(x, W[, b][, opts])",
     "x @ W^T + b, with W [out, in] and b [out] (optional), as in torch.nn.functional.linear; "
     "opts = {act = \"relu\" | \"gelu\"} applies an activation after the bias (opts may take b's "
     "place). gelu here is the tanh approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), "
     "unlike F.gelu (the exact erf form). On CUDA bias and activation are fused into the cuBLASLt "
     "matmul.",
     NULL},
    {"layer_norm", f_layer_norm, "engine.F.layer_norm(x[, weight][, bias][, eps])",
     "Layer norm over the last dim; weight and bias [last dim] may be nil; eps defaults to 1e-5.",
     NULL},
    {"rms_norm", f_rms_norm, "engine.F.rms_norm(x[, weight][, eps])",
     "x / sqrt(mean(x^2) + eps) * weight over the last dim; weight may be nil; eps defaults to "
     "1e-6.",
     NULL},
    {"embedding", f_embedding, "engine.F.embedding(ids, weight)",
     "Rows of weight [V, D] picked by integer ids (0-based, any shape): [ids..., D].", NULL},
    {"cross_entropy", f_cross_entropy,
     "engine.F.cross_entropy(logits, targets[, {ignore_index = -100}])",
     "Mean cross-entropy of logits [..., C] against integer class targets [...] (0-based), "
     "skipping targets equal to ignore_index.",
     NULL},
    {"cat", f_cat, "engine.cat(list, dim)  |  engine.F.cat(list, dim)",
     "Concatenates a Lua array of tensors along dim (default 0).", NULL},
    {"stack", f_stack, "engine.stack(list, dim)  |  engine.F.stack(list, dim)",
     "Stacks a Lua array of same-shaped tensors along a new dim (default 0).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_functional_nn(lua_State *L, int F, int methods) {
  lt_register(L, F, methods, shared_regs);
  lt_register(L, F, 0, f_regs);
}
