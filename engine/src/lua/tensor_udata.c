/* Tensors as Lua userdata: boxing, finalizer, the metatable and its arithmetic metamethods, and
 * the argument-checking helpers every other binding file uses. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lua/lua_internal.h"

/* A full userdata holding one reference; t is NULL once released (by __gc or t:free()), so a
 * second release is impossible. */
typedef struct {
  eng_tensor_t *t;
} lt_box_t;

static lt_box_t *box_at(lua_State *L, int idx) {
  return (lt_box_t *)luaL_testudata(L, idx, LT_TENSOR_MT);
}

void eng_lua_push_tensor(lua_State *L, eng_tensor_t *t) {
  if (!t) luaL_error(L, "engine: internal error: NULL tensor pushed");
  lt_box_t *b = (lt_box_t *)lua_newuserdata(L, sizeof *b);
  b->t = t;
  luaL_getmetatable(L, LT_TENSOR_MT);
  if (lua_isnil(L, -1)) {
    b->t = NULL;
    eng_tensor_release(t);
    luaL_error(L, "engine: the engine module is not open in this Lua state");
  }
  lua_setmetatable(L, -2);
  lt_gc_pace(L);
}

eng_tensor_t *eng_lua_to_tensor(lua_State *L, int idx) {
  lt_box_t *b = box_at(L, idx);
  return b ? b->t : NULL;
}

static const char *type_of(lua_State *L, int idx) {
  lt_box_t *b = box_at(L, idx);
  if (b) return b->t ? "tensor" : "freed tensor";
  return luaL_typename(L, idx);
}

int lt_raise(lua_State *L, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return luaL_error(L, "%s", msg);
}

eng_tensor_t *eng_lua_check_tensor(lua_State *L, int idx, const char *op) {
  eng_tensor_t *t = eng_lua_to_tensor(L, idx);
  if (!t) lt_type_error(L, idx, op, "a tensor");
  return t;
}

int lt_type_error(lua_State *L, int idx, const char *op, const char *what) {
  return lt_raise(L, "%s: argument %d must be %s, got %s", op, idx, what, type_of(L, idx));
}

int lt_fail(lua_State *L, const char *op) {
  const char *msg = eng_last_error();
  size_t n = strlen(op);
  if (!msg || !*msg) return lt_raise(L, "%s: failed without a message", op);
  if (strncmp(msg, op, n) == 0 && msg[n] == ':') return lt_raise(L, "%s", msg);
  return lt_raise(L, "%s: %s", op, msg);
}

void lt_no_more_args(lua_State *L, int idx, const char *op) {
  for (int i = idx; i <= lua_gettop(L); i++)
    if (!lua_isnil(L, i)) lt_raise(L, "%s: unexpected argument %d (%s)", op, i, type_of(L, i));
}

int lt_push_result(lua_State *L, const char *op, eng_status_t st, eng_tensor_t **t) {
  if (st != ENG_OK) return lt_fail(L, op);
  eng_lua_push_tensor(L, *t);
  return 1;
}

/* Integers that a double holds exactly and that fit int64. */
static int is_int64(double v) { return v == floor(v) && v >= -0x1p63 && v < 0x1p63; }

int64_t lt_check_int(lua_State *L, int idx, const char *op) {
  if (lua_type(L, idx) != LUA_TNUMBER) lt_type_error(L, idx, op, "an integer");
  double v = lua_tonumber(L, idx);
  if (!is_int64(v)) lt_raise(L, "%s: argument %d must be an integer, got %.17g", op, idx, v);
  return (int64_t)v;
}

int64_t lt_opt_int(lua_State *L, int idx, const char *op, int64_t def) {
  return lua_isnoneornil(L, idx) ? def : lt_check_int(L, idx, op);
}

double lt_check_num(lua_State *L, int idx, const char *op) {
  if (lua_type(L, idx) != LUA_TNUMBER) lt_type_error(L, idx, op, "a number");
  return lua_tonumber(L, idx);
}

double lt_opt_num(lua_State *L, int idx, const char *op, double def) {
  return lua_isnoneornil(L, idx) ? def : lt_check_num(L, idx, op);
}

/* [lo, hi] of an integer dtype. */
static void int_range(eng_dtype_t dt, double *lo, double *hi) {
  switch (dt) {
  case ENG_U8: *lo = 0, *hi = 255; break;
  case ENG_I32: *lo = -0x1p31, *hi = 0x1p31 - 1; break;
  default: *lo = -0x1p63, *hi = 0x1p63 - 1024; break; /* largest double below 2^63 */
  }
}

void lt_check_value_fits(lua_State *L, const char *op, double v, eng_dtype_t dt) {
  if (eng_dtype_is_float(dt)) return;
  double lo, hi;
  int_range(dt, &lo, &hi);
  if (v != floor(v))
    lt_raise(L, "%s: %.17g is not an integer (dtype %s)", op, v, eng_dtype_name(dt));
  if (v < lo || v > hi)
    lt_raise(L, "%s: %.17g is out of range for dtype %s", op, v, eng_dtype_name(dt));
}

int lt_int_list(lua_State *L, int first, const char *op, const char *what, int64_t *out, int max,
                int *next) {
  int n = 0;
  if (lua_type(L, first) == LUA_TTABLE) {
    size_t len = lua_objlen(L, first);
    if (len > (size_t)max)
      lt_raise(L, "%s: %s has %zu entries, at most %d allowed", op, what, len, max);
    for (int i = 0; i < (int)len; i++) {
      lua_rawgeti(L, first, i + 1);
      double v = lua_tonumber(L, -1);
      if (lua_type(L, -1) != LUA_TNUMBER || !is_int64(v)) {
        const char *got = lua_type(L, -1) == LUA_TNUMBER ? "a fraction" : luaL_typename(L, -1);
        lt_raise(L, "%s: %s entry %d must be an integer, got %s", op, what, i + 1, got);
      }
      lua_pop(L, 1);
      out[n++] = (int64_t)v;
    }
    *next = first + 1;
    return n;
  }
  if (lua_type(L, first) != LUA_TNUMBER) {
    char buf[128];
    snprintf(buf, sizeof buf, "a %s (a table or integers)", what);
    lt_type_error(L, first, op, buf);
  }
  int idx = first;
  while (lua_type(L, idx) == LUA_TNUMBER) {
    if (n == max) lt_raise(L, "%s: %s has more than %d entries", op, what, max);
    out[n++] = lt_check_int(L, idx, op);
    idx++;
  }
  *next = idx;
  return n;
}

void lt_check_opts(lua_State *L, int idx, const char *op, const char *const *allowed) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      lt_raise(L, "%s: option names must be strings, got %s", op, luaL_typename(L, -1));
    const char *key = lua_tostring(L, -1);
    if (!allowed[0]) lt_raise(L, "%s: takes no options, got '%s'", op, key);
    int ok = 0;
    for (int i = 0; allowed[i]; i++) ok |= strcmp(key, allowed[i]) == 0;
    if (!ok) {
      char list[256] = "";
      for (int i = 0; allowed[i]; i++) {
        if (i) strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, allowed[i], sizeof list - strlen(list) - 1);
      }
      lt_raise(L, "%s: unknown option '%s' (options: %s)", op, key, list);
    }
  }
}

static eng_dtype_t parse_dtype(lua_State *L, const char *op, const char *name) {
  eng_dtype_t dt;
  if (eng_dtype_parse(name, &dt) != ENG_OK)
    lt_raise(L, "%s: unknown dtype '%s' (dtypes: f64 f32 f16 bf16 i32 i64 u8)", op, name);
  return dt;
}

static eng_device_t parse_device(lua_State *L, const char *op, const char *name) {
  eng_device_t dev;
  if (eng_device_parse(name, &dev) != ENG_OK) lt_fail(L, op);
  return dev;
}

void lt_dtype_device_opts(lua_State *L, int idx, const char *op, eng_dtype_t *dt,
                          eng_device_t *dev) {
  static const char *const allowed[] = {"dtype", "device", NULL};
  if (lua_isnoneornil(L, idx)) return;
  if (lua_type(L, idx) != LUA_TTABLE)
    lt_type_error(L, idx, op, "an options table {dtype=, device=}");
  lt_check_opts(L, idx, op, allowed);
  lua_getfield(L, idx, "dtype");
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING)
      lt_raise(L, "%s: option dtype must be a string, got %s", op, luaL_typename(L, -1));
    *dt = parse_dtype(L, op, lua_tostring(L, -1));
  }
  lua_getfield(L, idx, "device");
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING)
      lt_raise(L, "%s: option device must be a string, got %s", op, luaL_typename(L, -1));
    *dev = parse_device(L, op, lua_tostring(L, -1));
  }
  lua_pop(L, 2);
}

eng_status_t lt_scalar_like(double v, const eng_tensor_t *like, eng_tensor_t **out) {
  eng_dtype_t dt = ENG_F32;
  eng_device_t dev = ENG_CPU_DEVICE;
  if (like) {
    dt = like->dtype;
    dev = eng_tensor_device(like);
    if (!eng_dtype_is_float(dt)) {
      double lo, hi;
      int_range(dt, &lo, &hi);
      if (!is_int64(v))
        dt = ENG_F32; /* fractions, NaN, Inf, huge: never truncated silently */
      else if (v < lo || v > hi)
        dt = ENG_I64;
    }
  }
  int64_t no_shape[1] = {0};
  return eng_tensor_full(no_shape, 0, v, dt, dev, out);
}

eng_tensor_t *lt_index_arg(lua_State *L, int idx, const char *op) {
  eng_tensor_t *t = eng_lua_to_tensor(L, idx);
  if (t) return t;
  if (lua_type(L, idx) != LUA_TTABLE)
    lt_type_error(L, idx, op, "an index tensor or a table of integers");
  int64_t n = (int64_t)lua_objlen(L, idx);
  double *v = (double *)lua_newuserdata(L, sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) {
    lua_rawgeti(L, idx, (int)(i + 1));
    if (lua_type(L, -1) != LUA_TNUMBER || !is_int64(lua_tonumber(L, -1)))
      lt_raise(L, "%s: index entry %lld must be an integer, got %s", op, (long long)(i + 1),
               lua_type(L, -1) == LUA_TNUMBER ? "a fraction" : luaL_typename(L, -1));
    v[i] = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  int64_t shape[1] = {n};
  if (eng_tensor_from_f64(v, shape, 1, ENG_I64, ENG_CPU_DEVICE, &t) != ENG_OK) lt_fail(L, op);
  lua_pop(L, 1); /* the buffer */
  eng_lua_push_tensor(L, t);
  return t;
}

void lt_push_int_list(lua_State *L, const int64_t *v, int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushnumber(L, (lua_Number)v[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

int lt_binary(lua_State *L, eng_binary_op_t op) {
  const char *name = eng_binary_name(op);
  eng_tensor_t *a = eng_lua_to_tensor(L, 1), *b = eng_lua_to_tensor(L, 2);
  int a_num = lua_type(L, 1) == LUA_TNUMBER, b_num = lua_type(L, 2) == LUA_TNUMBER;
  if (!a && !a_num) lt_type_error(L, 1, name, "a tensor or number");
  if (!b && !b_num) lt_type_error(L, 2, name, "a tensor or number");
  if (a_num && b_num) lt_raise(L, "%s: needs a tensor operand, got two numbers", name);
  eng_tensor_t *tmp = NULL;
  eng_status_t st = ENG_OK;
  if (a_num) {
    st = lt_scalar_like(lua_tonumber(L, 1), b, &tmp);
    a = tmp;
  } else if (b_num) {
    st = lt_scalar_like(lua_tonumber(L, 2), a, &tmp);
    b = tmp;
  }
  if (st != ENG_OK) return lt_fail(L, name);
  eng_tensor_t *out = NULL;
  st = eng_op_binary(op, a, b, &out);
  eng_tensor_release(tmp);
  if (st != ENG_OK) return lt_fail(L, name);
  eng_lua_push_tensor(L, out);
  return 1;
}

/* ---- metamethods ---- */

static int t_gc(lua_State *L) {
  lt_box_t *b = box_at(L, 1);
  if (b && b->t) {
    eng_tensor_release(b->t);
    b->t = NULL;
  }
  return 0;
}

static int t_len(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "len");
  if (t->ndim == 0) return luaL_error(L, "len: a 0-d tensor has no length");
  lua_pushnumber(L, (lua_Number)t->shape[0]);
  return 1;
}

static int t_add(lua_State *L) { return lt_binary(L, ENG_BINARY_ADD); }
static int t_sub(lua_State *L) { return lt_binary(L, ENG_BINARY_SUB); }
static int t_mul(lua_State *L) { return lt_binary(L, ENG_BINARY_MUL); }
static int t_div(lua_State *L) { return lt_binary(L, ENG_BINARY_DIV); }
static int t_pow(lua_State *L) { return lt_binary(L, ENG_BINARY_POW); }

static int t_unm(lua_State *L) {
  eng_tensor_t *t = eng_lua_check_tensor(L, 1, "neg"), *out = NULL;
  if (eng_op_unary(ENG_UNARY_NEG, t, &out) != ENG_OK) return lt_fail(L, "neg");
  eng_lua_push_tensor(L, out);
  return 1;
}

/* t:free(): drops the reference now instead of at the next collection. */
static int t_free(lua_State *L) {
  eng_lua_check_tensor(L, 1, "free");
  return t_gc(L);
}

void lt_open_tensor_metatable(lua_State *L, int methods) {
  static const luaL_Reg meta[] = {
      {"__gc", t_gc},   {"__tostring", lt_tensor_tostring},
      {"__len", t_len}, {"__add", t_add},
      {"__sub", t_sub}, {"__mul", t_mul},
      {"__div", t_div}, {"__pow", t_pow},
      {"__unm", t_unm}, {NULL, NULL},
  };
  luaL_newmetatable(L, LT_TENSOR_MT);
  luaL_setfuncs(L, meta, 0);
  lua_pushvalue(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);

  static const lt_reg_t regs[] = {
      {"free", t_free, "x:free()",
       "Drops x's reference to its memory now rather than at the next garbage collection (the "
       "memory goes back once no view of it is left). Using x afterwards is an error.",
       NULL},
      {NULL, NULL, NULL, NULL, NULL},
  };
  lt_register(L, methods, 0, regs);
}
