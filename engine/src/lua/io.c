/* engine.save / engine.load: checkpoints in the safetensors format (eng_checkpoint.h). */
#include <stdlib.h>
#include <string.h>

#include "eng_checkpoint.h"
#include "lua/lua_internal.h"

#define LOADED_MT "engine.safetensors"

typedef struct {
  const char *key;
  const void *value; /* eng_tensor_t* or const char* */
} entry_t;

static int by_key(const void *a, const void *b) {
  return strcmp(((const entry_t *)a)->key, ((const entry_t *)b)->key);
}

static int count_pairs(lua_State *L, int idx) {
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    n++;
  }
  return n;
}

/* The pairs of the table at idx, sorted by key, in a GC-owned buffer left on the stack. Keys must
 * be strings; values must be tensors (tensors != 0) or strings. */
static entry_t *collect(lua_State *L, int idx, int n, int tensors) {
  entry_t *e = (entry_t *)lua_newuserdata(L, sizeof(entry_t) * (size_t)(n ? n : 1));
  int i = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      lt_raise(L, "save: %s must be strings, got a %s key",
               tensors ? "tensor names" : "metadata keys", luaL_typename(L, -2));
    e[i].key = lua_tostring(L, -2);
    if (tensors) {
      e[i].value = eng_lua_to_tensor(L, -1);
      if (!e[i].value)
        lt_raise(L, "save: tensors['%s'] must be a tensor, got %s", e[i].key,
                 luaL_testudata(L, -1, LT_TENSOR_MT) ? "a freed tensor" : luaL_typename(L, -1));
    } else {
      if (lua_type(L, -1) != LUA_TSTRING)
        lt_raise(L, "save: metadata '%s' must be a string, got %s", e[i].key, luaL_typename(L, -1));
      e[i].value = lua_tostring(L, -1);
    }
    i++;
    lua_pop(L, 1);
  }
  qsort(e, (size_t)n, sizeof *e, by_key);
  return e;
}

static int e_save(lua_State *L) {
  if (lua_type(L, 1) != LUA_TSTRING) lt_type_error(L, 1, "save", "a path");
  if (lua_type(L, 2) != LUA_TTABLE) lt_type_error(L, 2, "save", "a table {name = tensor, ...}");
  int has_meta = !lua_isnoneornil(L, 3);
  if (has_meta && lua_type(L, 3) != LUA_TTABLE)
    lt_type_error(L, 3, "save", "a metadata table of strings");
  lt_no_more_args(L, 4, "save");
  const char *path = lua_tostring(L, 1);
  int n = count_pairs(L, 2), n_meta = has_meta ? count_pairs(L, 3) : 0;
  entry_t *ts = collect(L, 2, n, 1);
  entry_t *meta = has_meta ? collect(L, 3, n_meta, 0) : NULL;
  /* names, tensors, meta keys, meta values: one GC-owned array of pointers */
  void **arr = (void **)lua_newuserdata(L, sizeof(void *) * (size_t)(2 * n + 2 * n_meta + 1));
  const char **names = (const char **)arr;
  eng_tensor_t **tensors = (eng_tensor_t **)(arr + n);
  const char **keys = (const char **)(arr + 2 * n),
             **values = (const char **)(arr + 2 * n + n_meta);
  for (int i = 0; i < n; i++) {
    names[i] = ts[i].key;
    tensors[i] = (eng_tensor_t *)ts[i].value;
  }
  for (int i = 0; i < n_meta; i++) {
    keys[i] = meta[i].key;
    values[i] = (const char *)meta[i].value;
  }
  if (eng_safetensors_save(path, n, names, tensors, n_meta, keys, values) != ENG_OK)
    return lt_fail(L, "save");
  return 0;
}

/* __gc of the box holding a loaded file: frees what was not handed to Lua. */
static int loaded_gc(lua_State *L) {
  eng_safetensors_t *st = (eng_safetensors_t *)luaL_checkudata(L, 1, LOADED_MT);
  if (st->names || st->tensors || st->meta_keys || st->meta_values) eng_safetensors_free(st);
  memset(st, 0, sizeof *st);
  return 0;
}

static int e_load(lua_State *L) {
  if (lua_type(L, 1) != LUA_TSTRING) lt_type_error(L, 1, "load", "a path");
  lt_no_more_args(L, 2, "load");
  eng_safetensors_t *st = (eng_safetensors_t *)lua_newuserdata(L, sizeof *st);
  memset(st, 0, sizeof *st);
  luaL_getmetatable(L, LOADED_MT);
  lua_setmetatable(L, -2);
  if (eng_safetensors_load(lua_tostring(L, 1), st) != ENG_OK) {
    memset(st, 0, sizeof *st); /* a failed load has released what it made */
    return lt_fail(L, "load");
  }
  lua_createtable(L, 0, st->n);
  for (int i = 0; i < st->n; i++) {
    eng_tensor_retain(st->tensors[i]);
    eng_lua_push_tensor(L, st->tensors[i]);
    lua_setfield(L, -2, st->names[i]);
  }
  lua_createtable(L, 0, st->n_meta);
  for (int i = 0; i < st->n_meta; i++) {
    lua_pushstring(L, st->meta_values[i]);
    lua_setfield(L, -2, st->meta_keys[i]);
  }
  eng_safetensors_free(st);
  memset(st, 0, sizeof *st);
  return 2;
}

static const lt_reg_t io_regs[] = {
    {"save", e_save, "engine.save(path, {name = tensor, ...}[, metadata])",
     "Writes the tensors (any device, any layout) to a safetensors file, atomically. metadata is a "
     "table of strings stored in the header's __metadata__.",
     NULL},
    {"load", e_load, "engine.load(path) -> tensors, metadata",
     "Reads a safetensors file: a table {name = tensor} (CPU, contiguous) and its metadata table.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_io(lua_State *L, int engine) {
  luaL_newmetatable(L, LOADED_MT);
  lua_pushcfunction(L, loaded_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lt_register(L, engine, 0, io_regs);
}
