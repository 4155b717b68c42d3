/* The C half of engine.data: memory-mapped token files (engine.mapped_file) and the generator
 * state that checkpoints save and restore (engine.rng_state / engine.set_rng_state). */
#include <string.h>

#include "io/mapped_file.h"
#include "lua/lua_internal.h"

#define MAPPED_MT "engine.MappedFile"

static eng_mapped_file_t *check_open(lua_State *L, int idx, const char *op) {
  eng_mapped_file_t *m = (eng_mapped_file_t *)luaL_testudata(L, idx, MAPPED_MT);
  if (!m) lt_type_error(L, idx, op, "a mapped file");
  if (!m->data) lt_raise(L, "%s: the mapped file is closed", op);
  return m;
}

/* A Lua number that is an integer in [0, 2^53]: seeds and window numbers. */
static uint64_t check_counter(lua_State *L, int idx, const char *op) {
  int64_t v = lt_check_int(L, idx, op);
  if (v < 0 || v > ((int64_t)1 << 53))
    lt_raise(L, "%s: argument %d must be an integer in [0, 2^53], got %lld", op, idx, (long long)v);
  return (uint64_t)v;
}

/* engine.mapped_file(path[, dtype]) with dtype "u8" (bytes, the default), "u16" or "u32". */
static int d_open(lua_State *L) {
  if (lua_type(L, 1) != LUA_TSTRING) lt_type_error(L, 1, "mapped_file", "a path");
  const char *dtype = lua_isnoneornil(L, 2) ? "u8" : lua_tostring(L, 2);
  if (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TSTRING)
    lt_type_error(L, 2, "mapped_file", "a token dtype (\"u8\", \"u16\" or \"u32\")");
  lt_no_more_args(L, 3, "mapped_file");
  int elem = strcmp(dtype, "u8") == 0 ? 1 : strcmp(dtype, "u16") == 0 ? 2 : strcmp(dtype, "u32") == 0 ? 4 : 0;
  if (!elem) lt_raise(L, "mapped_file: unknown token dtype '%s' (expected u8, u16 or u32)", dtype);
  eng_mapped_file_t *m = (eng_mapped_file_t *)lua_newuserdata(L, sizeof *m);
  memset(m, 0, sizeof *m);
  luaL_getmetatable(L, MAPPED_MT);
  lua_setmetatable(L, -2);
  if (eng_mapped_file_open(lua_tostring(L, 1), elem, m) != ENG_OK) return lt_fail(L, "mapped_file");
  return 1;
}

static int m_len(lua_State *L) {
  eng_mapped_file_t *m = check_open(L, 1, "len");
  lua_pushnumber(L, (lua_Number)m->n);
  return 1;
}

/* A new CPU i64 tensor of the given shape, pushed (the GC owns it); its data pointer. */
static int64_t *push_i64(lua_State *L, const char *op, const int64_t *shape, int ndim) {
  eng_tensor_t *t = NULL;
  if (eng_tensor_empty(shape, ndim, ENG_I64, ENG_CPU_DEVICE, &t) != ENG_OK) lt_fail(L, op);
  eng_lua_push_tensor(L, t);
  return (int64_t *)eng_tensor_data(t);
}

static int m_read(lua_State *L) {
  eng_mapped_file_t *m = check_open(L, 1, "read");
  int64_t start = lt_check_int(L, 2, "read"), len = lt_check_int(L, 3, "read");
  lt_no_more_args(L, 4, "read");
  if (start < 0 || len < 0 || start > m->n || len > m->n - start)
    lt_raise(L, "read: [%lld, %lld) is outside the file's %lld tokens", (long long)start,
             (long long)(start + len), (long long)m->n);
  int64_t shape[1] = {len};
  int64_t *out = push_i64(L, "read", shape, 1);
  if (eng_mapped_file_read(m, start, len, out) != ENG_OK) return lt_fail(L, "read");
  return 1;
}

static int m_windows(lua_State *L) {
  eng_mapped_file_t *m = check_open(L, 1, "windows");
  uint64_t seed = check_counter(L, 2, "windows"), first = check_counter(L, 3, "windows");
  int64_t count = lt_check_int(L, 4, "windows"), len = lt_check_int(L, 5, "windows");
  lt_no_more_args(L, 6, "windows");
  if (count < 0) lt_raise(L, "windows: count must not be negative, got %lld", (long long)count);
  if (len < 1 || len > m->n)
    lt_raise(L,
             "windows: a window of %lld tokens does not fit in a file of %lld tokens (seq_len + 1 "
             "must be at most the file's length)",
             (long long)len, (long long)m->n);
  int64_t shape[2] = {count, len};
  int64_t *out = push_i64(L, "windows", shape, 2);
  if (eng_mapped_file_windows(m, seed, first, count, len, out) != ENG_OK)
    return lt_fail(L, "windows");
  return 1;
}

static int m_starts(lua_State *L) {
  eng_mapped_file_t *m = check_open(L, 1, "window_starts");
  uint64_t seed = check_counter(L, 2, "window_starts"), first = check_counter(L, 3, "window_starts");
  int64_t count = lt_check_int(L, 4, "window_starts"), len = lt_check_int(L, 5, "window_starts");
  lt_no_more_args(L, 6, "window_starts");
  if (count < 0 || len < 1 || len > m->n)
    lt_raise(L, "window_starts: need count >= 0 and 1 <= len <= %lld, got %lld and %lld",
             (long long)m->n, (long long)count, (long long)len);
  lua_createtable(L, (int)count, 0);
  for (int64_t b = 0; b < count; b++) {
    lua_pushnumber(L, (lua_Number)eng_mapped_file_window_start(m, seed, first + (uint64_t)b, len));
    lua_rawseti(L, -2, (int)(b + 1));
  }
  return 1;
}

static int m_close(lua_State *L) {
  eng_mapped_file_t *m = (eng_mapped_file_t *)luaL_checkudata(L, 1, MAPPED_MT);
  eng_mapped_file_close(m);
  return 0;
}

static int m_tostring(lua_State *L) {
  eng_mapped_file_t *m = (eng_mapped_file_t *)luaL_checkudata(L, 1, MAPPED_MT);
  if (!m->data) lua_pushliteral(L, "MappedFile(closed)");
  else lua_pushfstring(L, "MappedFile(%d-byte tokens, %d of them)", m->elem_size, (int)m->n);
  return 1;
}

/* ---- the generator state: {seed = n, offset = n} ---- */

static int r_state(lua_State *L) {
  lt_no_more_args(L, 1, "rng_state");
  eng_rng_t *g = &eng_lua_ctx(L)->rng;
  if (g->seed > ((uint64_t)1 << 53) || g->offset > ((uint64_t)1 << 53))
    lt_raise(L, "rng_state: seed or offset beyond 2^53 cannot be returned exactly");
  lua_createtable(L, 0, 2);
  lua_pushnumber(L, (lua_Number)g->seed);
  lua_setfield(L, -2, "seed");
  lua_pushnumber(L, (lua_Number)g->offset);
  lua_setfield(L, -2, "offset");
  return 1;
}

static int r_set_state(lua_State *L) {
  if (lua_type(L, 1) != LUA_TTABLE) lt_type_error(L, 1, "set_rng_state", "a table {seed=, offset=}");
  static const char *const allowed[] = {"seed", "offset", NULL};
  lt_check_opts(L, 1, "set_rng_state", allowed);
  lt_no_more_args(L, 2, "set_rng_state");
  lua_getfield(L, 1, "seed");
  lua_getfield(L, 1, "offset");
  uint64_t seed = check_counter(L, 2, "set_rng_state"), offset = check_counter(L, 3, "set_rng_state");
  eng_rng_t *g = &eng_lua_ctx(L)->rng;
  g->seed = seed;
  g->offset = offset;
  return 0;
}

static const lt_reg_t data_regs[] = {
    {"mapped_file", d_open, "engine.mapped_file(path[, dtype]) -> f",
     "Maps a file read-only as tokens: dtype \"u8\" (bytes, the default), \"u16\" or \"u32\" "
     "(little-endian). f:len(), f:read(start, len) (an i64 tensor), f:windows(seed, first, count, "
     "len) (i64 [count, len]: random windows number first .. first+count-1; window k of seed s is "
     "always the same), f:window_starts(...) (their starts, 0-based), f:close(). An empty file is "
     "an error.",
     NULL},
    {"rng_state", r_state, "engine.rng_state() -> {seed =, offset =}",
     "The generator's state (seed and Philox block offset), for checkpoints.", NULL},
    {"set_rng_state", r_set_state, "engine.set_rng_state{seed =, offset =}",
     "Restores a state from engine.rng_state(): the numbers that follow are those that followed it.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static const lt_reg_t mapped_methods[] = {
    {"len", m_len, "f:len()", "The number of tokens.", NULL},
    {"read", m_read, "f:read(start, len)", "Tokens [start, start + len) as an i64 tensor.", NULL},
    {"windows", m_windows, "f:windows(seed, first, count, len)",
     "Random windows first .. first + count - 1 of len tokens, as an i64 tensor [count, len].",
     NULL},
    {"window_starts", m_starts, "f:window_starts(seed, first, count, len)",
     "The 0-based starts of those windows, as a Lua array.", NULL},
    {"close", m_close, "f:close()", "Unmaps the file now (the GC does it otherwise).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_data(lua_State *L, int engine) {
  luaL_newmetatable(L, MAPPED_MT);
  lua_pushcfunction(L, m_close);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, m_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_newtable(L);
  lt_register(L, lua_gettop(L), 0, mapped_methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lt_register(L, engine, 0, data_regs);
}
