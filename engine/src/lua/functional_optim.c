/* The engine.F ops of optimizers and of the gradients of indexing: index_add, scatter_add,
 * adamw_, sum_squares, scale_. Lists of tensors are Lua arrays, read into GC-owned buffers. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lua/lua_internal.h"

typedef eng_status_t (*scatter_fn)(eng_tensor_t *, int64_t, eng_tensor_t *, eng_tensor_t *,
                                   eng_tensor_t **);

/* F.index_add / F.scatter_add(base, dim, index, src) */
static int scatter(lua_State *L, const char *op, scatter_fn fn) {
  eng_tensor_t *base = eng_lua_check_tensor(L, 1, op);
  int64_t dim = lt_check_int(L, 2, op);
  eng_tensor_t *src = eng_lua_check_tensor(L, 4, op);
  lt_no_more_args(L, 5, op);
  eng_tensor_t *idx = lt_index_arg(L, 3, op), *out = NULL;
  return lt_push_result(L, op, fn(base, dim, idx, src, &out), &out);
}

static int f_index_add(lua_State *L) { return scatter(L, "index_add", eng_op_index_add); }
static int f_scatter_add(lua_State *L) { return scatter(L, "scatter_add", eng_op_scatter_add); }

/* The Lua array of tensors at idx (called `what` in messages) in a GC-owned buffer; *n its
 * length. */
static eng_tensor_t **tensor_list(lua_State *L, int idx, const char *op, const char *what, int *n) {
  if (lua_type(L, idx) != LUA_TTABLE) {
    char want[64];
    snprintf(want, sizeof want, "a list of tensors (%s)", what);
    lt_type_error(L, idx, op, want);
  }
  *n = (int)lua_objlen(L, idx);
  eng_tensor_t **ts = (eng_tensor_t **)lua_newuserdata(L, sizeof(eng_tensor_t *) * (size_t)(*n ? *n : 1));
  for (int i = 0; i < *n; i++) {
    lua_rawgeti(L, idx, i + 1);
    ts[i] = eng_lua_to_tensor(L, -1);
    if (!ts[i])
      lt_raise(L, "%s: element %d of %s must be a tensor, got %s", op, i + 1, what,
               luaL_testudata(L, -1, LT_TENSOR_MT) ? "a freed tensor" : luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  return ts;
}

/* A number option of the table at idx; def when absent (required: raises when absent). */
static double num_opt(lua_State *L, int idx, const char *op, const char *key, double def,
                      int required) {
  lua_getfield(L, idx, key);
  double v = def;
  if (lua_isnil(L, -1)) {
    if (required) lt_raise(L, "%s: option %s is required", op, key);
  } else if (lua_type(L, -1) != LUA_TNUMBER) {
    lt_raise(L, "%s: option %s must be a number, got %s", op, key, luaL_typename(L, -1));
  } else {
    v = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

/* F.adamw_(params, grads, exp_avg, exp_avg_sq, {lr=, beta1=, beta2=, eps=, weight_decay=, step=}) */
static int f_adamw_(lua_State *L) {
  static const char *const names[4] = {"params", "grads", "exp_avg", "exp_avg_sq"};
  static const char *const allowed[] = {"lr", "beta1", "beta2", "eps", "weight_decay", "step", NULL};
  if (lua_type(L, 5) != LUA_TTABLE)
    lt_type_error(L, 5, "adamw_", "an options table {lr=, beta1=, beta2=, eps=, weight_decay=, step=}");
  lt_no_more_args(L, 6, "adamw_");
  lt_check_opts(L, 5, "adamw_", allowed);
  eng_tensor_t **lists[4];
  int n[4];
  for (int l = 0; l < 4; l++) lists[l] = tensor_list(L, l + 1, "adamw_", names[l], &n[l]);
  for (int l = 1; l < 4; l++)
    if (n[l] != n[0])
      return lt_raise(L, "adamw_: %s has %d tensors but params has %d", names[l], n[l], n[0]);
  char a[32], b[32];
  for (int l = 1; l < 4; l++)
    for (int i = 0; i < n[0]; i++)
      if (!eng_device_equal(eng_tensor_device(lists[l][i]), eng_tensor_device(lists[0][0])))
        return lt_raise(L, "adamw_: %s[%d] is on %s but params[1] is on %s", names[l], i + 1,
                        eng_device_name(eng_tensor_device(lists[l][i]), a, sizeof a),
                        eng_device_name(eng_tensor_device(lists[0][0]), b, sizeof b));
  eng_adamw_hparams_t h = {
      .lr = num_opt(L, 5, "adamw_", "lr", 1e-3, 0),
      .beta1 = num_opt(L, 5, "adamw_", "beta1", 0.9, 0),
      .beta2 = num_opt(L, 5, "adamw_", "beta2", 0.999, 0),
      .eps = num_opt(L, 5, "adamw_", "eps", 1e-8, 0),
      .weight_decay = num_opt(L, 5, "adamw_", "weight_decay", 1e-2, 0),
  };
  double step = num_opt(L, 5, "adamw_", "step", 0, 1);
  if (step != floor(step) || step < 1 || step > 0x1p53)
    return lt_raise(L, "adamw_: option step must be an integer >= 1 (this update's number), got %g",
                    step);
  h.step = (int64_t)step;
  if (eng_op_adamw_(lists[0], lists[1], lists[2], lists[3], n[0], &h)) return lt_fail(L, "adamw_");
  return 0;
}

/* F.sum_squares(list) */
static int f_sum_squares(lua_State *L) {
  int n;
  lt_no_more_args(L, 2, "sum_squares");
  eng_tensor_t **ts = tensor_list(L, 1, "sum_squares", "tensors", &n);
  if (n == 0) return lt_raise(L, "sum_squares: needs at least one tensor, got an empty list");
  eng_tensor_t *out = NULL;
  return lt_push_result(L, "sum_squares", eng_op_sum_squares(ts, n, &out), &out);
}

/* F.scale_(list, scale) */
static int f_scale_(lua_State *L) {
  int n;
  eng_tensor_t *s = eng_lua_check_tensor(L, 2, "scale_");
  lt_no_more_args(L, 3, "scale_");
  eng_tensor_t **ts = tensor_list(L, 1, "scale_", "tensors", &n);
  if (eng_op_scale_(ts, n, s)) return lt_fail(L, "scale_");
  return 0;
}

static const lt_reg_t f_regs[] = {
    {"index_add", f_index_add, "engine.F.index_add(base, dim, index, src)",
     "torch.index_add, out of place: a copy of base where, for each i, the slice index[i] along "
     "dim gets src's slice i added (index 1-D and 0-based: a tensor or a Lua array; repeated "
     "indices accumulate). The backward of embedding and index_select. bf16/f16 accumulate in "
     "f32. On CUDA float sums use atomics (their order, and so the last bits, may vary).",
     NULL},
    {"scatter_add", f_scatter_add, "engine.F.scatter_add(base, dim, index, src)",
     "torch.scatter_add, out of place: a copy of base with out[index[i][j]][j] += src[i][j] for "
     "dim 0 (and so on): the backward of gather. index is an integer tensor with base's number of "
     "dims.",
     NULL},
    {"adamw_", f_adamw_,
     "engine.F.adamw_(params, grads, exp_avg, exp_avg_sq, {lr=, beta1=, beta2=, eps=, "
     "weight_decay=, step=})",
     "One fused AdamW step in place over four equally long lists of tensors (one kernel launch "
     "on CUDA). step (required) is this update's 1-based number; the defaults are lr 1e-3, beta1 "
     "0.9, beta2 0.999, eps 1e-8, weight_decay 1e-2 (decoupled: p *= 1 - lr*wd). params "
     "f32/bf16/f16/f64 and contiguous; grads their dtype or f32; moments f32 (f64 for f64 "
     "params). Returns nothing.",
     NULL},
    {"sum_squares", f_sum_squares, "engine.F.sum_squares(list)",
     "The sum of x^2 over every element of every tensor in the list, as a 0-d tensor (f32, f64 "
     "when any input is f64), accumulated in f64 and the same on every run: the squared "
     "gradient norm for clipping.",
     NULL},
    {"scale_", f_scale_, "engine.F.scale_(list, scale)",
     "Multiplies every tensor of the list in place by scale, a one-element tensor read on the "
     "device (no host sync: the clipping factor can stay on the GPU). Returns nothing.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_functional_optim(lua_State *L, int F) { lt_register(L, F, 0, f_regs); }
