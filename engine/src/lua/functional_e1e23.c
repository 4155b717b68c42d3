/* engine.F.e1 / e23 (the recurrences, returning their public outputs) and the plain op functions
 * e1_forward, e1_backward, e23_forward, e23_backward (every output, for tests and benchmarks). */
#include <string.h>

#include "lua/lua_internal.h"

static eng_tensor_t *opt_tensor(lua_State *L, int idx, const char *op) {
  return lua_isnoneornil(L, idx) ? NULL : eng_lua_check_tensor(L, idx, op);
}

/* A tensor field of the options table at idx, or NULL. */
static eng_tensor_t *opt_field_tensor(lua_State *L, int idx, const char *key, const char *op) {
  if (lua_isnoneornil(L, idx)) return NULL;
  lua_getfield(L, idx, key);
  eng_tensor_t *t = NULL;
  if (!lua_isnil(L, -1)) {
    t = lua_isuserdata(L, -1) ? eng_lua_check_tensor(L, lua_gettop(L), op) : NULL;
    if (!t) lt_raise(L, "%s: option %s must be a tensor, got %s", op, key, luaL_typename(L, -1));
  }
  lua_pop(L, 1); /* the options table keeps the tensor alive */
  return t;
}

/* An integer field of the options table at idx, or def. */
static int64_t opt_field_int(lua_State *L, int idx, const char *key, const char *op, int64_t def) {
  if (lua_isnoneornil(L, idx)) return def;
  lua_getfield(L, idx, key);
  int64_t v = def;
  if (!lua_isnil(L, -1)) v = lt_check_int(L, lua_gettop(L), op);
  lua_pop(L, 1);
  return v;
}

static void check_opts(lua_State *L, int idx, const char *op, const char *const *allowed) {
  if (lua_isnoneornil(L, idx)) return;
  if (lua_type(L, idx) != LUA_TTABLE) lt_type_error(L, idx, op, "an options table");
  lt_check_opts(L, idx, op, allowed);
}

/* Pushes the n results (or raises on st, releasing them). */
static int push_all(lua_State *L, const char *op, eng_status_t st, eng_tensor_t **t, int n) {
  if (st) {
    for (int k = 0; k < n; k++) eng_tensor_release(t[k]);
    return lt_fail(L, op);
  }
  for (int k = 0; k < n; k++) eng_lua_push_tensor(L, t[k]);
  return n;
}

/* e1(xw, z, W_h, b[, {state = h0}]) */
static int e1_common(lua_State *L, const char *op, int all) {
  static const char *const allowed[] = {"state", NULL};
  eng_tensor_t *xw = eng_lua_check_tensor(L, 1, op), *z = eng_lua_check_tensor(L, 2, op);
  eng_tensor_t *W = eng_lua_check_tensor(L, 3, op), *b = eng_lua_check_tensor(L, 4, op);
  check_opts(L, 5, op, allowed);
  eng_tensor_t *h0 = opt_field_tensor(L, 5, "state", op);
  lt_no_more_args(L, 6, op);
  eng_tensor_t *out[3] = {NULL, NULL, NULL};
  eng_status_t st = eng_op_e1(xw, z, W, b, h0, &out[0], &out[1], all ? &out[2] : NULL);
  return push_all(L, op, st, out, all ? 3 : 2);
}

static int f_e1(lua_State *L) { return e1_common(L, "e1", 0); }
static int f_e1_forward(lua_State *L) { return e1_common(L, "e1_forward", 1); }

/* e1_backward(z, W_h, h0|nil, hs, dy, dh_T|nil) */
static int f_e1_backward(lua_State *L) {
  const char *op = "e1_backward";
  eng_tensor_t *z = eng_lua_check_tensor(L, 1, op), *W = eng_lua_check_tensor(L, 2, op);
  eng_tensor_t *h0 = opt_tensor(L, 3, op), *hs = eng_lua_check_tensor(L, 4, op);
  eng_tensor_t *dy = eng_lua_check_tensor(L, 5, op), *dhT = opt_tensor(L, 6, op);
  lt_no_more_args(L, 7, op);
  eng_tensor_t *g[5] = {NULL};
  eng_status_t st = eng_op_e1_backward(z, W, h0, hs, dy, dhT, &g[0], &g[1], &g[2], &g[3], &g[4]);
  return push_all(L, op, st, g, 5);
}

/* e23(xw, W_h, W_write, b[, {state = h0, tape = tape0, n_slots = N, ckpt_every = C}]) */
static int e23_common(lua_State *L, const char *op, int all) {
  static const char *const allowed[] = {"state", "tape", "n_slots", "ckpt_every", NULL};
  eng_tensor_t *xw = eng_lua_check_tensor(L, 1, op), *Wh = eng_lua_check_tensor(L, 2, op);
  eng_tensor_t *Ww = eng_lua_check_tensor(L, 3, op), *b = eng_lua_check_tensor(L, 4, op);
  check_opts(L, 5, op, allowed);
  eng_tensor_t *h0 = opt_field_tensor(L, 5, "state", op), *t0 = opt_field_tensor(L, 5, "tape", op);
  int64_t n = opt_field_int(L, 5, "n_slots", op, 0), C = opt_field_int(L, 5, "ckpt_every", op, 16);
  lt_no_more_args(L, 6, op);
  eng_tensor_t *out[4] = {NULL};
  eng_status_t st =
      eng_op_e23(xw, Wh, Ww, b, h0, t0, n, C, &out[0], &out[1], &out[2], all ? &out[3] : NULL);
  return push_all(L, op, st, out, all ? 4 : 3);
}

static int f_e23(lua_State *L) { return e23_common(L, "e23", 0); }
static int f_e23_forward(lua_State *L) { return e23_common(L, "e23_forward", 1); }

/* e23_backward(xw, W_h, W_write, b, h0|nil, hs, ckpt, dhs, dh_T|nil, dtape_T|nil[, {ckpt_every}])
 */
static int f_e23_backward(lua_State *L) {
  static const char *const allowed[] = {"ckpt_every", NULL};
  const char *op = "e23_backward";
  eng_tensor_t *in[10];
  for (int k = 0; k < 10; k++)
    in[k] = (k == 4 || k == 8 || k == 9) ? opt_tensor(L, k + 1, op)
                                         : eng_lua_check_tensor(L, k + 1, op);
  check_opts(L, 11, op, allowed);
  int64_t C = opt_field_int(L, 11, "ckpt_every", op, 16);
  lt_no_more_args(L, 12, op);
  eng_tensor_t *g[6] = {NULL};
  eng_status_t st = eng_op_e23_backward(in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7],
                                        in[8], in[9], C, &g[0], &g[1], &g[2], &g[3], &g[4], &g[5]);
  return push_all(L, op, st, g, 6);
}

static const lt_reg_t regs[] = {
    {"e1", f_e1, "y, h_T = engine.F.e1(xw, z, W_h, b[, {state = h0}])",
     "E1 gated Elman recurrence: h_t = tanh(xw_t + h_{t-1} W_h^T + b), y_t = h_t * silu(z_t). "
     "xw (= x W_x^T), z, y [B,T,d]; W_h [d,d]; b [d]; h0, h_T [B,d] (h0 defaults to zeros).",
     NULL},
    {"e1_forward", f_e1_forward, "y, h_T, hs = engine.F.e1_forward(xw, z, W_h, b[, {state = h0}])",
     "engine.F.e1, also returning hs [B,T,d] (every h_t), which e1_backward needs.", NULL},
    {"e1_backward", f_e1_backward,
     "dxw, dz, dW_h, db, dh0 = engine.F.e1_backward(z, W_h, h0, hs, dy, dh_T)",
     "Gradients of E1 from the upstream dy [B,T,d] and dh_T [B,d] (h0 and dh_T may be nil).", NULL},
    {"e23", f_e23,
     "hs, h_T, tape_T = engine.F.e23(xw, W_h, W_write, b[, {state = h0, tape = tape0, n_slots = N, "
     "ckpt_every = 16}])",
     "E23 dual-memory Elman recurrence: a tape [N,d] and h [d] per batch row; r = softmax(H h / "
     "sqrt(d)), h_t = tanh(h_{t-1} W_h^T + xw_t + r^T H + b), w = h_t W_write^T, a = softmax(H h_t "
     "/ "
     "sqrt(d)), H <- (1 - a) H + a w^T. xw, hs [B,T,d]; tape [B,N,d] (n_slots is needed when no "
     "tape is given; zeros by default).",
     NULL},
    {"e23_forward", f_e23_forward,
     "hs, h_T, tape_T, ckpt = engine.F.e23_forward(xw, W_h, W_write, b[, opts])",
     "engine.F.e23, also returning ckpt [B, W] (f32; f64 for f64 values), W = ceil(T/C)*N*d + "
     "T*(2N + d): per batch row the tapes before steps 0, C, 2C, ... that e23_backward replays "
     "from, then the trace of a [T,N], r [T,N] and w [T,d].",
     NULL},
    {"e23_backward", f_e23_backward,
     "dxw, dW_h, dW_write, db, dh0, dtape0 = engine.F.e23_backward(xw, W_h, W_write, b, h0, hs, "
     "ckpt, dhs, dh_T, dtape_T[, {ckpt_every = 16}])",
     "Gradients of E23 from the upstream dhs [B,T,d], dh_T [B,d] and dtape_T [B,N,d] (h0, dh_T "
     "and dtape_T may be nil); ckpt_every must be the forward's.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_functional_e1e23(lua_State *L, int F) { lt_register(L, F, 0, regs); }
