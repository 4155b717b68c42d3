/* The Lua binding of the engine: what the host (CLI/REPL) and the embedding API need from it. */
#ifndef ENG_BINDING_H
#define ENG_BINDING_H

#include <lua.h>
#include "eng_tensor.h"

/* Per-Lua-state context: the RNG and where log output goes. Created by luaopen_engine. */
typedef struct {
  eng_rng_t rng;
  eng_log_fn log;
  void *log_user;
} eng_lua_ctx_t;

/* Opens the module: returns the `engine` table (also what `require "engine"` gives). */
int luaopen_engine(lua_State *L);
eng_lua_ctx_t *eng_lua_ctx(lua_State *L);

/* Pushes t as a tensor userdata, taking over one reference (t may not be NULL). */
void eng_lua_push_tensor(lua_State *L, eng_tensor_t *t);
/* The tensor at idx, or NULL when that value is not a tensor. No new reference. */
eng_tensor_t *eng_lua_to_tensor(lua_State *L, int idx);
/* Like eng_lua_to_tensor but raises "op: argument N must be a tensor, got TYPE". */
eng_tensor_t *eng_lua_check_tensor(lua_State *L, int idx, const char *op);

/* A lua_pcall message handler: the error text (non-string errors through __tostring) plus a
 * traceback. Shared by the embedding API and the host. */
int eng_lua_traceback(lua_State *L);

/* Sends a message to the state's log callback (or stdout/stderr when none). */
void eng_lua_log(lua_State *L, int level, const char *msg);

#endif
