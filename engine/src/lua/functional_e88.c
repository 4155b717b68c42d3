/* engine.F.e88 (y, S_T) and the plain op functions e88_forward (y, S_T, ckpt) and e88_backward
 * (every gradient), for the autograd wiring, tests and benchmarks. */
#include "lua/lua_internal.h"

static const char *const OPT_KEYS[] = {"state", "l2", "linear_state", "ckpt_every", NULL};

static eng_tensor_t *opt_tensor(lua_State *L, int idx, const char *op) {
  return lua_isnoneornil(L, idx) ? NULL : eng_lua_check_tensor(L, idx, op);
}

/* A boolean field of the options table at idx, or def. */
static int opt_bool(lua_State *L, int idx, const char *key, const char *op, int def) {
  lua_getfield(L, idx, key);
  int v = def;
  if (lua_type(L, -1) == LUA_TBOOLEAN) v = lua_toboolean(L, -1);
  else if (!lua_isnil(L, -1))
    lt_raise(L, "%s: option %s must be a boolean, got %s", op, key, luaL_typename(L, -1));
  lua_pop(L, 1);
  return v;
}

/* The options table at idx (nil or none: defaults); its state tensor into *S0 when S0 is given. */
static eng_e88_opts_t read_opts(lua_State *L, int idx, const char *op, eng_tensor_t **S0) {
  eng_e88_opts_t o = {.l2 = 1, .linear_state = 0, .ckpt_every = 0};  /* 0: the default */
  if (S0) *S0 = NULL;
  if (lua_isnoneornil(L, idx)) return o;
  if (lua_type(L, idx) != LUA_TTABLE) lt_type_error(L, idx, op, "an options table");
  lt_check_opts(L, idx, op, OPT_KEYS);
  o.l2 = opt_bool(L, idx, "l2", op, 1);
  o.linear_state = opt_bool(L, idx, "linear_state", op, 0);
  lua_getfield(L, idx, "ckpt_every");
  if (!lua_isnil(L, -1)) {
    int64_t c = lt_check_int(L, lua_gettop(L), op);
    if (c < 1 || c > 1 << 30) lt_raise(L, "%s: option ckpt_every must be >= 1, got %lld", op, (long long)c);
    o.ckpt_every = (int)c;
  }
  lua_pop(L, 1);
  lua_getfield(L, idx, "state");
  if (!lua_isnil(L, -1)) {
    if (!S0) lt_raise(L, "%s: option state is not taken here (pass S0 as an argument)", op);
    *S0 = eng_lua_check_tensor(L, lua_gettop(L), op); /* the options table keeps it alive */
  }
  lua_pop(L, 1);
  return o;
}

/* Pushes the n results (NULL ones as nil), or raises on st after releasing them. */
static int push_all(lua_State *L, const char *op, eng_status_t st, eng_tensor_t **t, int n) {
  if (st) {
    for (int k = 0; k < n; k++) eng_tensor_release(t[k]);
    return lt_fail(L, op);
  }
  for (int k = 0; k < n; k++) {
    if (t[k]) eng_lua_push_tensor(L, t[k]);
    else lua_pushnil(L);
  }
  return n;
}

/* e88(q, k, v, decay[, g][, opts]) */
static int e88_common(lua_State *L, const char *op, int with_ckpt) {
  eng_tensor_t *q = eng_lua_check_tensor(L, 1, op), *k = eng_lua_check_tensor(L, 2, op);
  eng_tensor_t *v = eng_lua_check_tensor(L, 3, op), *decay = eng_lua_check_tensor(L, 4, op);
  eng_tensor_t *g = opt_tensor(L, 5, op), *S0 = NULL;
  eng_e88_opts_t o = read_opts(L, 6, op, &S0);
  lt_no_more_args(L, 7, op);
  eng_tensor_t *out[3] = {NULL, NULL, NULL};
  eng_status_t st = eng_op_e88(q, k, v, decay, g, S0, &o, &out[0], &out[1],
                               with_ckpt ? &out[2] : NULL);
  return push_all(L, op, st, out, with_ckpt ? 3 : 2);
}

static int f_e88(lua_State *L) { return e88_common(L, "e88", 0); }
static int f_e88_forward(lua_State *L) { return e88_common(L, "e88_forward", 1); }

/* e88_backward(q, k, v, decay, g|nil, S0|nil, ckpt, dy, dS_T|nil[, opts]) */
static int f_e88_backward(lua_State *L) {
  const char *op = "e88_backward";
  eng_tensor_t *q = eng_lua_check_tensor(L, 1, op), *k = eng_lua_check_tensor(L, 2, op);
  eng_tensor_t *v = eng_lua_check_tensor(L, 3, op), *decay = eng_lua_check_tensor(L, 4, op);
  eng_tensor_t *g = opt_tensor(L, 5, op), *S0 = opt_tensor(L, 6, op);
  eng_tensor_t *ckpt = eng_lua_check_tensor(L, 7, op), *dy = eng_lua_check_tensor(L, 8, op);
  eng_tensor_t *dS_T = opt_tensor(L, 9, op);
  eng_e88_opts_t o = read_opts(L, 10, op, NULL);
  lt_no_more_args(L, 11, op);
  eng_e88_grads_t gr = {0};
  eng_status_t st = eng_op_e88_backward(q, k, v, decay, g, S0, ckpt, dy, dS_T, &o, &gr);
  eng_tensor_t *out[6] = {gr.dq, gr.dk, gr.dv, gr.ddecay, gr.dg, gr.dS0};
  return push_all(L, op, st, out, 6);
}

static const lt_reg_t regs[] = {
    {"e88", f_e88,
     "engine.F.e88(q, k, v, decay[, g][, {state = S0, l2 = true, linear_state = false, "
     "ckpt_every}]) -> y, S_T",
     "The E88 recurrence, per batch and head with state S [n,v] (S0, or zero): k^ = k/(|k|+1e-6), "
     "q^ likewise (l2 = false: as given); delta = v_t - S^T k^; S <- tanh(decay_t S + k^ delta^T) "
     "(linear_state: no tanh); y_t = (S^T q^) * silu(g_t) (g nil: no gate). q, k [B,T,H,n]; v, g "
     "[B,T,H,v]; decay [B,T,H]; S0, S_T [B,H,n,v] in f32 (f64 for f64 values). On CUDA: f32, f16, "
     "bf16 with n in {16, 32, 64}. ckpt_every: the backward's checkpoint interval (default 8 at "
     "n = 32, else 16: where the CUDA backward replays fewest steps for the bytes).",
     NULL},
    {"e88_forward", f_e88_forward,
     "engine.F.e88_forward(q, k, v, decay[, g][, opts]) -> y, S_T, ckpt",
     "engine.F.e88 that also returns ckpt [B,H,W], what e88_backward needs: per (b, h) the state "
     "before steps 0, C, 2C, ... (C = ckpt_every; ceil(T/C) of n*v each), then delta [T][v] and "
     "o = S^T q^ [T][v] of every step; W = ceil(T/C)*n*v + 2*T*v.",
     NULL},
    {"e88_backward", f_e88_backward,
     "engine.F.e88_backward(q, k, v, decay, g, S0, ckpt, dy, dS_T[, {l2, linear_state, "
     "ckpt_every}]) -> dq, dk, dv, ddecay, dg, dS0",
     "Gradients of e88 from its inputs (g, S0, dS_T may be nil) and e88_forward's ckpt, given dy "
     "[B,T,H,v] and dS_T [B,H,n,v]: each checkpointed segment is recomputed with the saved delta, "
     "then walked backward. dg is nil without g, dS0 without S0. opts must match the forward's.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_functional_e88(lua_State *L, int F) { lt_register(L, F, 0, regs); }
