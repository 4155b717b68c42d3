/* The embedding API (engine.h): an engine is one Lua state with the `engine` module loaded. Every
 * call into Lua runs protected with a traceback handler, so no Lua error escapes to the host. */
#include "engine.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#include "lua/binding.h"

struct eng_engine {
  lua_State *L;
  char *error; /* the last error (with traceback), NULL when none */
};

static void set_error(eng_engine_t *e, const char *msg) {
  free(e->error);
  e->error = strdup(msg ? msg : "(error object is not a string)");
}

/* Calls the function below the nargs arguments on top with the traceback handler; on error keeps
 * the message in e. Returns 0 on success (results left on the stack). */
static int pcall_traced(eng_engine_t *e, int nargs, int nresults) {
  lua_State *L = e->L;
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, eng_lua_traceback);
  lua_insert(L, base);
  int st = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  if (st != 0) {
    set_error(e, lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  return 0;
}

/* print() for embedded states: the same text as Lua's print, sent through the engine's log. */
static int log_print(lua_State *L) {
  int n = lua_gettop(L);
  luaL_Buffer b;
  lua_getglobal(L, "tostring");
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; i++) {
    lua_pushvalue(L, n + 1);
    lua_pushvalue(L, i);
    lua_call(L, 1, 1);
    if (!lua_isstring(L, -1)) return luaL_error(L, "'tostring' must return a string to 'print'");
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  eng_lua_log(L, ENG_LOG_INFO, lua_tostring(L, -1));
  return 0;
}

static int open_state(lua_State *L) {
  luaL_openlibs(L);
  lua_pushcfunction(L, luaopen_engine);
  lua_call(L, 0, 1);
  lua_setglobal(L, "engine");
  lua_pushcfunction(L, log_print);
  lua_setglobal(L, "print");
  return 0;
}

eng_engine_t *eng_engine_new(void) {
  eng_engine_t *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->L = luaL_newstate();
  if (!e->L) {
    free(e);
    eng_error(ENG_ERR_OOM, "engine: cannot create a Lua state");
    return NULL;
  }
  lua_pushcfunction(e->L, open_state);
  if (pcall_traced(e, 0, 0) != 0) {
    eng_error(ENG_ERR_INTERNAL, "engine: opening the engine module failed: %s", e->error);
    eng_engine_free(e);
    return NULL;
  }
  return e;
}

void eng_engine_free(eng_engine_t *e) {
  if (!e) return;
  if (e->L) lua_close(e->L); /* runs every tensor's __gc */
  free(e->error);
  free(e);
}

int eng_engine_run_string(eng_engine_t *e, const char *code, const char *chunkname) {
  lua_State *L = e->L;
  if (!code) {
    set_error(e, "run_string: code is NULL");
    return -1;
  }
  lua_pushfstring(L, "=%s", chunkname ? chunkname : "(string)");
  int st = luaL_loadbuffer(L, code, strlen(code), lua_tostring(L, -1));
  lua_remove(L, -2);
  if (st != 0) {
    set_error(e, lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  return pcall_traced(e, 0, 0);
}

/* Sets the global `arg` = {[0] = path, argv...} (protected: _G may have metamethods). */
static int set_arg(lua_State *L) {
  const char *path = (const char *)lua_touserdata(L, 1);
  int argc = (int)lua_tointeger(L, 2);
  const char *const *argv = (const char *const *)lua_touserdata(L, 3);
  lua_createtable(L, argc, 1);
  lua_pushstring(L, path);
  lua_rawseti(L, -2, 0);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setglobal(L, "arg");
  return 0;
}

int eng_engine_run_file(eng_engine_t *e, const char *path, int argc, const char *const *argv) {
  lua_State *L = e->L;
  if (!path || argc < 0 || (argc > 0 && !argv)) {
    set_error(e, "run_file: bad arguments (NULL path, or argc > 0 with NULL argv)");
    return -1;
  }
  lua_pushcfunction(L, set_arg);
  lua_pushlightuserdata(L, (void *)path);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, (void *)argv);
  if (pcall_traced(e, 3, 0) != 0) return -1;
  if (luaL_loadfile(L, path) != 0) {
    set_error(e, lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  for (int i = 0; i < argc; i++) lua_pushstring(L, argv[i]); /* the chunk's `...` */
  return pcall_traced(e, argc, 0);
}

typedef struct {
  const char *fname;
  eng_tensor_t *const *in;
  int n_in;
  eng_tensor_t **out;
  int n_out;
  int stored;
} call_t;

/* Looks up a global or a dotted path ("engine.F.tanh"), pushing the value. */
static void push_path(lua_State *L, const char *name) {
  const char *dot = strchr(name, '.');
  lua_pushlstring(L, name, dot ? (size_t)(dot - name) : strlen(name));
  lua_gettable(L, LUA_GLOBALSINDEX);
  while (dot) {
    const char *part = dot + 1;
    dot = strchr(part, '.');
    if (!lua_istable(L, -1)) {
      luaL_error(L, "call: '%s' is not a function (%s is not a table)", name, luaL_typename(L, -1));
    }
    lua_pushlstring(L, part, dot ? (size_t)(dot - part) : strlen(part));
    lua_gettable(L, -2);
    lua_remove(L, -2);
  }
}

static int do_call(lua_State *L) {
  call_t *c = (call_t *)lua_touserdata(L, 1);
  lua_settop(L, 0);
  push_path(L, c->fname);
  if (!lua_isfunction(L, -1) && !luaL_getmetafield(L, -1, "__call"))
    return luaL_error(L, "call: '%s' is not a function (got %s)", c->fname, luaL_typename(L, -1));
  lua_settop(L, 1);
  for (int i = 0; i < c->n_in; i++) {
    if (!c->in[i]) return luaL_error(L, "call: input %d of '%s' is NULL", i + 1, c->fname);
    eng_tensor_retain(c->in[i]);
    eng_lua_push_tensor(L, c->in[i]);
  }
  lua_call(L, c->n_in, LUA_MULTRET);
  int n = lua_gettop(L) < c->n_out ? lua_gettop(L) : c->n_out;
  for (int i = 1; i <= n; i++) {
    if (!eng_lua_to_tensor(L, i))
      return luaL_error(L, "call: result %d of '%s' is %s, expected a tensor", i, c->fname,
                        luaL_testudata(L, i, "engine.Tensor") ? "a freed tensor"
                                                              : luaL_typename(L, i));
  }
  for (int i = 1; i <= n; i++) {
    c->out[i - 1] = eng_lua_to_tensor(L, i);
    eng_tensor_retain(c->out[i - 1]);
  }
  c->stored = n;
  return 0;
}

int eng_engine_call(eng_engine_t *e, const char *fname, eng_tensor_t *const *in, int n_in,
                    eng_tensor_t **out, int n_out) {
  if (!fname || n_in < 0 || n_out < 0 || (n_in > 0 && !in) || (n_out > 0 && !out)) {
    set_error(e, "call: bad arguments (NULL name, or NULL arrays with non-zero counts)");
    return -1;
  }
  for (int i = 0; i < n_out; i++) out[i] = NULL;
  call_t c = {fname, in, n_in, out, n_out, 0};
  lua_pushcfunction(e->L, do_call);
  lua_pushlightuserdata(e->L, &c);
  if (pcall_traced(e, 1, 0) != 0) return -1;
  return c.stored;
}

typedef struct {
  const char *name;
  eng_tensor_t *t;
} global_t;

static int do_set_tensor(lua_State *L) {
  global_t *g = (global_t *)lua_touserdata(L, 1);
  eng_tensor_retain(g->t);
  eng_lua_push_tensor(L, g->t);
  lua_setglobal(L, g->name);
  return 0;
}

static int do_get_tensor(lua_State *L) {
  global_t *g = (global_t *)lua_touserdata(L, 1);
  lua_getglobal(L, g->name);
  eng_tensor_t *t = eng_lua_to_tensor(L, -1);
  if (!t)
    return luaL_error(L, "get_tensor: global '%s' is %s, not a tensor", g->name,
                      luaL_typename(L, -1));
  eng_tensor_retain(t);
  g->t = t;
  return 0;
}

int eng_engine_set_tensor(eng_engine_t *e, const char *name, eng_tensor_t *t) {
  if (!name || !t) {
    set_error(e, "set_tensor: name and tensor must not be NULL");
    return -1;
  }
  global_t g = {name, t};
  lua_pushcfunction(e->L, do_set_tensor);
  lua_pushlightuserdata(e->L, &g);
  return pcall_traced(e, 1, 0);
}

int eng_engine_get_tensor(eng_engine_t *e, const char *name, eng_tensor_t **out) {
  if (!name || !out) {
    set_error(e, "get_tensor: name and out must not be NULL");
    return -1;
  }
  *out = NULL;
  global_t g = {name, NULL};
  lua_pushcfunction(e->L, do_get_tensor);
  lua_pushlightuserdata(e->L, &g);
  if (pcall_traced(e, 1, 0) != 0) return -1;
  *out = g.t;
  return 0;
}

const char *eng_engine_last_error(const eng_engine_t *e) { return e->error ? e->error : ""; }

void eng_engine_set_log(eng_engine_t *e, eng_log_fn fn, void *user) {
  eng_lua_ctx_t *ctx = eng_lua_ctx(e->L);
  ctx->log = fn;
  ctx->log_user = fn ? user : NULL;
}

struct lua_State *eng_engine_lua(eng_engine_t *e) {
  return e->L;
}
