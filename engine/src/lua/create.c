/* Tensor creation from Lua: engine.zeros/ones/empty/full/arange/linspace/eye/rand/randn/randint/
 * tensor. Shapes come as a table {2, 3} or as leading numbers (2, 3); a trailing options table
 * gives {dtype = "f32", device = "cpu"} (the defaults). */
#include <math.h>
#include <string.h>

#include "lua/lua_internal.h"

static void check_sizes(lua_State *L, const char *op, const int64_t *shape, int ndim) {
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      char buf[128];
      lt_raise(L, "%s: size %lld in shape %s must not be negative", op, (long long)shape[i],
               eng_shape_str(shape, ndim, buf, sizeof buf));
    }
  }
}

/* shape at `first`, then options, then nothing. Returns ndim. */
static int shape_and_opts(lua_State *L, int first, const char *op, int64_t *shape, eng_dtype_t *dt,
                          eng_device_t *dev) {
  int next;
  int ndim = lt_int_list(L, first, op, "shape", shape, ENG_MAX_DIMS, &next);
  check_sizes(L, op, shape, ndim);
  lt_dtype_device_opts(L, next, op, dt, dev);
  lt_no_more_args(L, next + 1, op);
  return ndim;
}

typedef eng_status_t (*shape_ctor_fn)(const int64_t *, int, eng_dtype_t, eng_device_t,
                                      eng_tensor_t **);

static int from_shape(lua_State *L, const char *op, shape_ctor_fn fn) {
  int64_t shape[ENG_MAX_DIMS];
  eng_dtype_t dt = ENG_F32;
  eng_device_t dev = ENG_CPU_DEVICE;
  int ndim = shape_and_opts(L, 1, op, shape, &dt, &dev);
  eng_tensor_t *t = NULL;
  return lt_push_result(L, op, fn(shape, ndim, dt, dev, &t), &t);
}

static int c_empty(lua_State *L) { return from_shape(L, "empty", eng_tensor_empty); }
static int c_zeros(lua_State *L) { return from_shape(L, "zeros", eng_tensor_zeros); }
static int c_ones(lua_State *L) { return from_shape(L, "ones", eng_tensor_ones); }

/* full({2, 3}, v[, opts]) or full(2, 3, v[, opts]): with leading numbers the last one is v. */
static int c_full(lua_State *L) {
  int64_t shape[ENG_MAX_DIMS];
  int ndim = 0, next;
  double value;
  if (lua_type(L, 1) == LUA_TTABLE) {
    ndim = lt_int_list(L, 1, "full", "shape", shape, ENG_MAX_DIMS, &next);
    value = lt_check_num(L, next, "full");
    next++;
  } else {
    int last = 1;
    while (lua_type(L, last + 1) == LUA_TNUMBER) last++;
    value = lt_check_num(L, last, "full");
    for (int i = 1; i < last; i++) {
      if (ndim == ENG_MAX_DIMS) lt_raise(L, "full: shape has more than %d entries", ENG_MAX_DIMS);
      shape[ndim++] = lt_check_int(L, i, "full");
    }
    next = last + 1;
  }
  check_sizes(L, "full", shape, ndim);
  eng_dtype_t dt = ENG_F32;
  eng_device_t dev = ENG_CPU_DEVICE;
  lt_dtype_device_opts(L, next, "full", &dt, &dev);
  lt_no_more_args(L, next + 1, "full");
  lt_check_value_fits(L, "full", value, dt);
  eng_tensor_t *t = NULL;
  return lt_push_result(L, "full", eng_tensor_full(shape, ndim, value, dt, dev, &t), &t);
}

/* Leading numbers (at most max of them); returns their count. */
static int leading_numbers(lua_State *L, const char *op, double *v, int min, int max) {
  int n = 0;
  while (n < max && lua_type(L, n + 1) == LUA_TNUMBER) {
    v[n] = lua_tonumber(L, n + 1);
    n++;
  }
  if (n < min) lt_type_error(L, n + 1, op, "a number");
  return n;
}

static int c_arange(lua_State *L) {
  double v[3];
  int n = leading_numbers(L, "arange", v, 1, 3);
  double start = n >= 2 ? v[0] : 0, end = n >= 2 ? v[1] : v[0], step = n == 3 ? v[2] : 1;
  if (step == 0 || !isfinite(step) || !isfinite(start) || !isfinite(end))
    lt_raise(L, "arange: start, end and step must be finite and step non-zero, got %g, %g, %g",
             start, end, step);
  eng_dtype_t dt = ENG_F32;
  eng_device_t dev = ENG_CPU_DEVICE;
  lt_dtype_device_opts(L, n + 1, "arange", &dt, &dev);
  lt_no_more_args(L, n + 2, "arange");
  eng_tensor_t *t = NULL;
  return lt_push_result(L, "arange", eng_tensor_arange(start, end, step, dt, dev, &t), &t);
}

static int c_linspace(lua_State *L) {
  double a = lt_check_num(L, 1, "linspace"), b = lt_check_num(L, 2, "linspace");
  int64_t steps = lt_check_int(L, 3, "linspace");
  if (steps < 0) lt_raise(L, "linspace: steps must not be negative, got %lld", (long long)steps);
  eng_dtype_t dt = ENG_F32;
  eng_device_t dev = ENG_CPU_DEVICE;
  lt_dtype_device_opts(L, 4, "linspace", &dt, &dev);
  lt_no_more_args(L, 5, "linspace");
  eng_tensor_t *t = NULL;
  return lt_push_result(L, "linspace", eng_tensor_linspace(a, b, steps, dt, dev, &t), &t);
}

static int c_eye(lua_State *L) {
  int64_t n = lt_check_int(L, 1, "eye"), m = n;
  int next = 2;
  if (lua_type(L, 2) == LUA_TNUMBER) m = lt_check_int(L, 2, "eye"), next = 3;
  if (n < 0 || m < 0)
    lt_raise(L, "eye: sizes must not be negative, got %lld x %lld", (long long)n, (long long)m);
  eng_dtype_t dt = ENG_F32;
  eng_device_t dev = ENG_CPU_DEVICE;
  lt_dtype_device_opts(L, next, "eye", &dt, &dev);
  lt_no_more_args(L, next + 1, "eye");
  eng_tensor_t *t = NULL;
  return lt_push_result(L, "eye", eng_tensor_eye(n, m, dt, dev, &t), &t);
}

static int c_rand(lua_State *L) {
  int64_t shape[ENG_MAX_DIMS];
  eng_dtype_t dt = ENG_F32;
  eng_device_t dev = ENG_CPU_DEVICE;
  int ndim = shape_and_opts(L, 1, "rand", shape, &dt, &dev);
  eng_tensor_t *t = NULL;
  eng_status_t st = eng_tensor_rand(&eng_lua_ctx(L)->rng, shape, ndim, 0, 1, dt, dev, &t);
  return lt_push_result(L, "rand", st, &t);
}

static int c_randn(lua_State *L) {
  int64_t shape[ENG_MAX_DIMS];
  eng_dtype_t dt = ENG_F32;
  eng_device_t dev = ENG_CPU_DEVICE;
  int ndim = shape_and_opts(L, 1, "randn", shape, &dt, &dev);
  eng_tensor_t *t = NULL;
  eng_status_t st = eng_tensor_randn(&eng_lua_ctx(L)->rng, shape, ndim, 0, 1, dt, dev, &t);
  return lt_push_result(L, "randn", st, &t);
}

static int c_randint(lua_State *L) {
  int64_t low = lt_check_int(L, 1, "randint"), high = lt_check_int(L, 2, "randint");
  if (high <= low)
    lt_raise(L, "randint: high (%lld) must be greater than low (%lld)", (long long)high,
             (long long)low);
  int64_t shape[ENG_MAX_DIMS];
  eng_dtype_t dt = ENG_I64;
  eng_device_t dev = ENG_CPU_DEVICE;
  int ndim = shape_and_opts(L, 3, "randint", shape, &dt, &dev);
  eng_tensor_t *t = NULL;
  eng_status_t st = eng_tensor_randint(&eng_lua_ctx(L)->rng, shape, ndim, low, high, dt, dev, &t);
  return lt_push_result(L, "randint", st, &t);
}

/* ---- engine.tensor(nested tables) ---- */

/* The shape implied by following the first element of each level. */
static int nested_shape(lua_State *L, int idx, int64_t *shape) {
  int ndim = 0;
  lua_pushvalue(L, idx);
  while (lua_type(L, -1) == LUA_TTABLE) {
    if (ndim == ENG_MAX_DIMS) lt_raise(L, "tensor: nested deeper than %d levels", ENG_MAX_DIMS);
    size_t n = lua_objlen(L, -1);
    shape[ndim++] = (int64_t)n;
    if (n == 0) break;
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  return ndim;
}

/* Copies the numbers of the table at idx (level `depth`, 0-based) into out[*pos...], checking
 * every level has the length of the first. */
static void nested_fill(lua_State *L, int idx, int depth, const int64_t *shape, int ndim,
                        eng_dtype_t dt, double *out, int64_t *pos) {
  int64_t n = (int64_t)lua_objlen(L, idx);
  if (n != shape[depth])
    lt_raise(L, "tensor: ragged nested table at depth %d: expected %lld elements, got %lld",
             depth + 1, (long long)shape[depth], (long long)n);
  for (int64_t i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, (int)i);
    int type = lua_type(L, -1);
    if (depth + 1 < ndim) {
      if (type != LUA_TTABLE)
        lt_raise(L, "tensor: ragged nested table at depth %d: expected a table, got %s", depth + 2,
                 lua_typename(L, type));
      nested_fill(L, lua_gettop(L), depth + 1, shape, ndim, dt, out, pos);
    } else {
      if (type == LUA_TTABLE)
        lt_raise(L, "tensor: ragged nested table at depth %d: expected a number, got a table",
                 depth + 2);
      if (type != LUA_TNUMBER)
        lt_raise(L, "tensor: elements must be numbers, got %s at depth %d", lua_typename(L, type),
                 depth + 1);
      double v = lua_tonumber(L, -1);
      lt_check_value_fits(L, "tensor", v, dt);
      out[(*pos)++] = v;
    }
    lua_pop(L, 1);
  }
}

static int c_tensor(lua_State *L) {
  eng_dtype_t dt = ENG_F32;
  eng_device_t dev = ENG_CPU_DEVICE;
  lt_dtype_device_opts(L, 2, "tensor", &dt, &dev);
  lt_no_more_args(L, 3, "tensor");
  int64_t shape[ENG_MAX_DIMS] = {0};
  int ndim = 0;
  int64_t numel = 1;
  double scalar;
  double *values = &scalar;
  if (lua_type(L, 1) == LUA_TNUMBER) {
    scalar = lua_tonumber(L, 1);
    lt_check_value_fits(L, "tensor", scalar, dt);
  } else if (lua_type(L, 1) == LUA_TTABLE) {
    ndim = nested_shape(L, 1, shape);
    for (int i = 0; i < ndim; i++) numel *= shape[i];
    values = (double *)lua_newuserdata(L, sizeof(double) * (size_t)(numel ? numel : 1));
    int64_t pos = 0;
    nested_fill(L, 1, 0, shape, ndim, dt, values, &pos);
  } else {
    lt_type_error(L, 1, "tensor", "a number or a nested table of numbers");
  }
  eng_tensor_t *t = NULL;
  return lt_push_result(L, "tensor", eng_tensor_from_f64(values, shape, ndim, dt, dev, &t), &t);
}

#define OPTS "opts: {dtype = \"f32\", device = \"cpu\"} (the defaults)."

static const lt_reg_t create_regs[] = {
    {"empty", c_empty, "engine.empty(shape[, opts])",
     "A tensor with uninitialised values. shape: {2, 3} or 2, 3. " OPTS, NULL},
    {"zeros", c_zeros, "engine.zeros(shape[, opts])",
     "A tensor of zeros. shape: {2, 3} or 2, 3. " OPTS, NULL},
    {"ones", c_ones, "engine.ones(shape[, opts])", "A tensor of ones. shape: {2, 3} or 2, 3. " OPTS,
     NULL},
    {"full", c_full, "engine.full(shape, value[, opts])",
     "A tensor filled with value. shape: {2, 3}, or leading numbers full(2, 3, value). " OPTS,
     NULL},
    {"arange", c_arange, "engine.arange(end[, opts]) / engine.arange(start, end[, step][, opts])",
     "start, start + step, ... up to but excluding end (step may be negative). " OPTS, NULL},
    {"linspace", c_linspace, "engine.linspace(a, b, n[, opts])",
     "n evenly spaced values from a to b, both included. " OPTS, NULL},
    {"eye", c_eye, "engine.eye(n[, m][, opts])",
     "The n x m identity matrix (m = n by default). " OPTS, NULL},
    {"rand", c_rand, "engine.rand(shape[, opts])",
     "Uniform random values in [0, 1) from this state's generator (engine.manual_seed). " OPTS,
     NULL},
    {"randn", c_randn, "engine.randn(shape[, opts])",
     "Standard normal random values from this state's generator (engine.manual_seed). " OPTS, NULL},
    {"randint", c_randint, "engine.randint(low, high, shape[, opts])",
     "Random integers uniform in [low, high). The dtype defaults to i64; "
     "opts: {dtype = \"i64\", device = \"cpu\"}.",
     NULL},
    {"tensor", c_tensor, "engine.tensor(data[, opts])",
     "A tensor from a number (0-d) or nested tables of numbers, e.g. engine.tensor{{1, 2}, {3, "
     "4}}. "
     "Every level must have the same length. Integer dtypes take integers only. " OPTS,
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_create(lua_State *L, int engine) { lt_register(L, engine, 0, create_regs); }
