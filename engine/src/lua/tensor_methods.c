/* Tensor methods that are not math ops: queries, element access, conversion, copies and views.
 * Dims and indices count from 0 (negative ones from the end); shapes are 1-based Lua tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua/lua_internal.h"

/* ---- queries ---- */

static int m_shape(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "shape");
  lt_push_int_list(L, t->shape, t->ndim);
  return 1;
}

static int m_size(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "size");
  if (lua_isnoneornil(L, 2)) return m_shape(L);
  int d;
  if (eng_dim_wrap("size", lt_check_int(L, 2, "size"), t->ndim, &d) != ENG_OK)
    return lt_fail(L, "size");
  lua_pushnumber(L, (lua_Number)t->shape[d]);
  return 1;
}

static int m_dim(lua_State *L) {
  lua_pushinteger(L, eng_lua_check_tensor(L, 1, "dim")->ndim);
  return 1;
}

static int m_numel(lua_State *L) {
  lua_pushnumber(L, (lua_Number)eng_tensor_numel(eng_lua_check_tensor(L, 1, "numel")));
  return 1;
}

static int m_dtype(lua_State *L) {
  lua_pushstring(L, eng_dtype_name(eng_lua_check_tensor(L, 1, "dtype")->dtype));
  return 1;
}

static int m_device(lua_State *L) {
  char buf[32];
  lua_pushstring(
      L, eng_device_name(eng_tensor_device(eng_lua_check_tensor(L, 1, "device")), buf, sizeof buf));
  return 1;
}

static int m_stride(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "stride");
  lt_push_int_list(L, t->stride, t->ndim);
  return 1;
}

static int m_is_contiguous(lua_State *L) {
  lua_pushboolean(L, eng_tensor_is_contiguous(eng_lua_check_tensor(L, 1, "is_contiguous")));
  return 1;
}

/* ---- element access ---- */

static int m_item(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "item");
  if (eng_tensor_numel(t) != 1) {
    char buf[128];
    return lt_raise(L, "item: expected a tensor with one element, got shape %s",
                    ENG_SHAPE_STR(t, buf));
  }
  double v;
  if (eng_tensor_to_f64(t, &v) != ENG_OK) return lt_fail(L, "item");
  lua_pushnumber(L, v);
  return 1;
}

static void push_nested(lua_State *L, const eng_tensor_t *t, int d, const double *v, int64_t *pos) {
  if (d == t->ndim) {
    lua_pushnumber(L, v[(*pos)++]);
    return;
  }
  lua_createtable(L, (int)t->shape[d], 0);
  for (int64_t i = 0; i < t->shape[d]; i++) {
    push_nested(L, t, d + 1, v, pos);
    lua_rawseti(L, -2, (int)(i + 1));
  }
}

static int m_tolist(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "tolist");
  int64_t n = eng_tensor_numel(t);
  double *v = (double *)lua_newuserdata(L, sizeof(double) * (size_t)(n ? n : 1)); /* GC-owned */
  if (eng_tensor_to_f64(t, v) != ENG_OK) return lt_fail(L, "tolist");
  int64_t pos = 0;
  push_nested(L, t, 0, v, &pos);
  return 1;
}

/* Reads t->ndim indices from argument 2 on into idx (negative ones count from the end). */
static void element_index(lua_State *L, const eng_tensor_t *t, const char *op, int given,
                          int64_t *idx) {
  char buf[128];
  if (given != t->ndim)
    lt_raise(L, "%s: expected %d indices for a tensor of shape %s, got %d", op, t->ndim,
             ENG_SHAPE_STR(t, buf), given);
  for (int d = 0; d < t->ndim; d++) {
    int64_t i = lt_check_int(L, d + 2, op);
    int64_t w = i < 0 ? i + t->shape[d] : i;
    if (w < 0 || w >= t->shape[d])
      lt_raise(L, "%s: index %lld is out of range for dim %d of size %lld (shape %s)", op,
               (long long)i, d, (long long)t->shape[d], ENG_SHAPE_STR(t, buf));
    idx[d] = w;
  }
}

static int m_get(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "get");
  int64_t idx[ENG_MAX_DIMS];
  element_index(L, t, "get", lua_gettop(L) - 1, idx);
  double v;
  if (eng_tensor_get(t, idx, &v) != ENG_OK) return lt_fail(L, "get");
  lua_pushnumber(L, v);
  return 1;
}

static int m_set(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "set");
  int top = lua_gettop(L);
  if (top < 2) return lt_raise(L, "set: expected indices and a value");
  double v = lt_check_num(L, top, "set");
  int64_t idx[ENG_MAX_DIMS];
  element_index(L, t, "set", top - 2, idx);
  lt_check_value_fits(L, "set", v, t->dtype);
  if (eng_tensor_set(t, idx, v) != ENG_OK) return lt_fail(L, "set");
  lua_settop(L, 1);
  return 1;
}

/* ---- conversion and copies ---- */

/* Converts to dt then moves to dev, handing out one reference. */
static int convert(lua_State *L, const char *op, eng_tensor_t *t, eng_dtype_t dt,
                   eng_device_t dev) {
  eng_tensor_t *a = NULL, *b = NULL;
  if (eng_tensor_to_dtype(t, dt, &a) != ENG_OK) return lt_fail(L, op);
  eng_status_t st = eng_tensor_to_device(a, dev, &b);
  eng_tensor_release(a);
  return lt_push_result(L, op, st, &b);
}

static int m_to(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "to");
  eng_dtype_t dt = t->dtype;
  eng_device_t dev = eng_tensor_device(t);
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *name = lua_tostring(L, 2);
    eng_dtype_t as_dt;
    eng_device_t as_dev;
    if (eng_dtype_parse(name, &as_dt) == ENG_OK)
      dt = as_dt;
    else if (eng_device_parse(name, &as_dev) == ENG_OK)
      dev = as_dev;
    else if (strncmp(name, "cuda", 4) == 0 || strncmp(name, "cpu", 3) == 0)
      return lt_fail(L, "to");
    else
      return lt_raise(L,
                      "to: '%s' is neither a dtype (f64 f32 f16 bf16 i32 i64 u8) nor a device (%s)",
                      name, eng_last_error());
  } else if (lua_type(L, 2) == LUA_TTABLE) {
    lt_dtype_device_opts(L, 2, "to", &dt, &dev);
  } else {
    return lt_type_error(L, 2, "to", "a dtype, a device or {dtype=, device=}");
  }
  lt_no_more_args(L, 3, "to");
  return convert(L, "to", t, dt, dev);
}

static int m_cpu(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "cpu");
  return convert(L, "cpu", t, t->dtype, ENG_CPU_DEVICE);
}

/* x:float(), x:long(), ...: upvalue 1 is the dtype. */
static int m_as_dtype(lua_State *L) {
  eng_dtype_t dt = (eng_dtype_t)lua_tointeger(L, lua_upvalueindex(1));
  const char *op = eng_dtype_name(dt);
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, op);
  return convert(L, op, t, dt, eng_tensor_device(t));
}

static int m_clone(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "clone"), *out = NULL;
  return lt_push_result(L, "clone", eng_tensor_clone(t, &out), &out);
}

static int m_contiguous(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "contiguous"), *out = NULL;
  return lt_push_result(L, "contiguous", eng_tensor_contiguous(t, &out), &out);
}

static int m_copy_(lua_State *L) {
  eng_tensor_t *dst = eng_lua_check_tensor(L, 1, "copy_");
  eng_tensor_t *src = eng_lua_check_tensor(L, 2, "copy_");
  if (eng_tensor_copy_(dst, src) != ENG_OK) return lt_fail(L, "copy_");
  lua_settop(L, 1);
  return 1;
}

static int m_fill_(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "fill_");
  double v = lt_check_num(L, 2, "fill_");
  lt_check_value_fits(L, "fill_", v, t->dtype);
  if (eng_tensor_fill_(t, v) != ENG_OK) return lt_fail(L, "fill_");
  lua_settop(L, 1);
  return 1;
}

/* ---- views ---- */

typedef eng_status_t (*shape_view_fn)(eng_tensor_t *, const int64_t *, int, eng_tensor_t **);

/* x:op(shape) with the shape as a table or as numbers. */
static int shape_view(lua_State *L, const char *op, shape_view_fn fn) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, op), *out = NULL;
  int64_t shape[ENG_MAX_DIMS];
  int next;
  int n = lt_int_list(L, 2, op, "shape", shape, ENG_MAX_DIMS, &next);
  lt_no_more_args(L, next, op);
  return lt_push_result(L, op, fn(t, shape, n, &out), &out);
}

static int m_view(lua_State *L) { return shape_view(L, "view", eng_tensor_view); }
static int m_reshape(lua_State *L) { return shape_view(L, "reshape", eng_tensor_reshape); }
static int m_expand(lua_State *L) { return shape_view(L, "expand", eng_tensor_expand); }
static int m_permute(lua_State *L) { return shape_view(L, "permute", eng_tensor_permute); }

static int m_transpose(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "transpose"), *out = NULL;
  int64_t d0 = lt_check_int(L, 2, "transpose"), d1 = lt_check_int(L, 3, "transpose");
  lt_no_more_args(L, 4, "transpose");
  return lt_push_result(L, "transpose", eng_tensor_transpose(t, d0, d1, &out), &out);
}

static int m_t(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "t"), *out = NULL;
  lt_no_more_args(L, 2, "t");
  if (t->ndim > 2) {
    char buf[128];
    return lt_raise(L, "t: expects a tensor of at most 2 dims, got shape %s (use transpose)",
                    ENG_SHAPE_STR(t, buf));
  }
  if (t->ndim < 2) {
    eng_tensor_retain(t);
    eng_lua_push_tensor(L, t);
    return 1;
  }
  return lt_push_result(L, "t", eng_tensor_transpose(t, 0, 1, &out), &out);
}

static int m_narrow(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "narrow"), *out = NULL;
  int64_t dim = lt_check_int(L, 2, "narrow"), start = lt_check_int(L, 3, "narrow");
  int64_t len = lt_check_int(L, 4, "narrow");
  lt_no_more_args(L, 5, "narrow");
  return lt_push_result(L, "narrow", eng_tensor_narrow(t, dim, start, len, &out), &out);
}

static int m_slice(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "slice"), *out = NULL;
  int64_t dim = lt_check_int(L, 2, "slice");
  int64_t start = lt_opt_int(L, 3, "slice", 0), stop = lt_opt_int(L, 4, "slice", INT64_MAX);
  int64_t step = lt_opt_int(L, 5, "slice", 1);
  lt_no_more_args(L, 6, "slice");
  return lt_push_result(L, "slice", eng_tensor_slice(t, dim, start, stop, step, &out), &out);
}

static int m_select(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "select"), *out = NULL;
  int64_t dim = lt_check_int(L, 2, "select"), index = lt_check_int(L, 3, "select");
  lt_no_more_args(L, 4, "select");
  return lt_push_result(L, "select", eng_tensor_select(t, dim, index, &out), &out);
}

static int m_squeeze(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "squeeze"), *out = NULL;
  int all = lua_isnoneornil(L, 2);
  int64_t dim = all ? -1 : lt_check_int(L, 2, "squeeze");
  lt_no_more_args(L, 3, "squeeze");
  return lt_push_result(L, "squeeze", eng_tensor_squeeze(t, dim, all, &out), &out);
}

static int m_unsqueeze(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "unsqueeze"), *out = NULL;
  int64_t dim = lt_check_int(L, 2, "unsqueeze");
  lt_no_more_args(L, 3, "unsqueeze");
  return lt_push_result(L, "unsqueeze", eng_tensor_unsqueeze(t, dim, &out), &out);
}

typedef eng_status_t (*pieces_fn)(eng_tensor_t *, int64_t, int64_t, eng_tensor_t ***, int *);

/* split/chunk: a Lua array of the pieces. */
static int pieces(lua_State *L, const char *op, pieces_fn fn) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, op);
  int64_t k = lt_check_int(L, 2, op), dim = lt_opt_int(L, 3, op, 0);
  lt_no_more_args(L, 4, op);
  lua_newtable(L);
  eng_tensor_t **outs = NULL;
  int n = 0;
  if (fn(t, k, dim, &outs, &n) != ENG_OK) return lt_fail(L, op);
  for (int i = 0; i < n; i++) {
    eng_lua_push_tensor(L, outs[i]);
    lua_rawseti(L, -2, i + 1);
  }
  free(outs);
  return 1;
}

static int m_split(lua_State *L) { return pieces(L, "split", eng_tensor_split); }
static int m_chunk(lua_State *L) { return pieces(L, "chunk", eng_tensor_chunk); }

static const lt_reg_t method_regs[] = {
    {"shape", m_shape, "x:shape()", "The shape as a Lua array, e.g. {2, 3}.", NULL},
    {"size", m_size, "x:size([dim])",
     "The size of dim (0-based, negative from the end), or the shape.", NULL},
    {"dim", m_dim, "x:dim()", "The number of dims.", NULL},
    {"numel", m_numel, "x:numel()", "The number of elements.", NULL},
    {"dtype", m_dtype, "x:dtype()", "The dtype name: f64 f32 f16 bf16 i32 i64 u8.", NULL},
    {"device", m_device, "x:device()", "\"cpu\" or \"cuda:N\".", NULL},
    {"stride", m_stride, "x:stride()", "The strides in elements, as a Lua array.", NULL},
    {"is_contiguous", m_is_contiguous, "x:is_contiguous()",
     "Whether the elements are dense in row-major order.", NULL},
    {"item", m_item, "x:item()", "The value of a one-element tensor, as a Lua number.", NULL},
    {"tolist", m_tolist, "x:tolist()",
     "The values as nested Lua tables (a number for a 0-d tensor).", NULL},
    {"get", m_get, "x:get(i, j, ...)",
     "One element (one 0-based index per dim; negative from the end).", NULL},
    {"set", m_set, "x:set(i, j, ..., value)", "Writes one element in place; returns x.", NULL},
    {"to", m_to, "x:to(dtype | device | {dtype=, device=})",
     "A converted and/or moved tensor (x itself when nothing changes), e.g. x:to(\"f64\"), "
     "x:to(\"cuda\").",
     NULL},
    {"cpu", m_cpu, "x:cpu()", "The tensor on the CPU (x itself when already there).", NULL},
    {"clone", m_clone, "x:clone()", "A contiguous copy with its own memory.", NULL},
    {"contiguous", m_contiguous, "x:contiguous()", "x when contiguous, else a contiguous copy.",
     NULL},
    {"copy_", m_copy_, "x:copy_(src)",
     "Copies src into x in place (src broadcast to x's shape, dtype converted); returns x.", NULL},
    {"fill_", m_fill_, "x:fill_(value)", "Sets every element to value in place; returns x.", NULL},
    {"view", m_view, "x:view(shape)",
     "A view with another shape ({2, 3} or 2, 3; one -1 is inferred). The layout must allow it "
     "(use reshape otherwise).",
     NULL},
    {"reshape", m_reshape, "x:reshape(shape)",
     "Like view, but copies when the layout does not allow a view.", NULL},
    {"transpose", m_transpose, "x:transpose(d0, d1)", "A view with dims d0 and d1 swapped.", NULL},
    {"t", m_t, "x:t()",
     "The transpose of a matrix (a view); 0-d and 1-d tensors come back as they are.", NULL},
    {"permute", m_permute, "x:permute(dims)",
     "A view with the dims reordered, e.g. x:permute(2, 0, 1).", NULL},
    {"narrow", m_narrow, "x:narrow(dim, start, length)",
     "A view of elements start .. start+length-1 along dim.", NULL},
    {"slice", m_slice, "x:slice(dim, start[, stop][, step])",
     "A view of start:stop:step along dim, Python style (stop excluded and defaults to the end; "
     "negatives count from the end).",
     NULL},
    {"select", m_select, "x:select(dim, i)", "A view of index i along dim, with that dim removed.",
     NULL},
    {"squeeze", m_squeeze, "x:squeeze([dim])",
     "A view without size-1 dims (or without dim, when it has size 1).", NULL},
    {"unsqueeze", m_unsqueeze, "x:unsqueeze(dim)", "A view with a size-1 dim inserted at dim.",
     NULL},
    {"expand", m_expand, "x:expand(shape)",
     "A broadcast view (size-1 dims repeat with stride 0; -1 keeps a size).", NULL},
    {"split", m_split, "x:split(size[, dim])  |  engine.F.split(x, size[, dim])",
     "A Lua array of views of `size` elements along dim (default 0); the last may be smaller.",
     NULL},
    {"chunk", m_chunk, "x:chunk(n[, dim])  |  engine.F.chunk(x, n[, dim])",
     "A Lua array of at most n nearly equal views along dim (default 0).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_methods(lua_State *L, int methods) {
  lt_register(L, methods, 0, method_regs);
  static const struct {
    const char *name;
    eng_dtype_t dt;
  } shortcuts[] = {{"double", ENG_F64},    {"float", ENG_F32}, {"half", ENG_F16},
                   {"bfloat16", ENG_BF16}, {"int", ENG_I32},   {"long", ENG_I64}};
  for (size_t i = 0; i < sizeof shortcuts / sizeof shortcuts[0]; i++) {
    char sig[32];
    snprintf(sig, sizeof sig, "x:%s()", shortcuts[i].name);
    lua_pushinteger(L, shortcuts[i].dt);
    lua_pushfstring(L, "x converted to %s (x itself when it already is).",
                    eng_dtype_name(shortcuts[i].dt));
    const char *desc = lua_tostring(L, -1);
    lua_insert(L, -2);
    lt_push_documented(L, m_as_dtype, 1, sig, desc, NULL);
    lua_setfield(L, methods, shortcuts[i].name);
    lua_pop(L, 1);
  }
}
