/* The documentation registry: a weak-keyed table mapping each engine function (or module table)
 * to "signature\n\ndescription". Every C function is registered here with its doc; Lua modules add
 * theirs with engine.doc, and engine.help (lua/engine/init.lua) reads it. */
#include "eng_registry.h"
#include "lua/lua_internal.h"

/* Registry key of the docs table (its address is unique in the process). */
static const char docs_key = 'd';

static void push_docs(lua_State *L) {
  lua_pushlightuserdata(L, (void *)&docs_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
}

void lt_doc_set(lua_State *L, int idx, const char *doc) {
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  push_docs(L);
  lua_pushvalue(L, idx);
  lua_pushstring(L, doc);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

void lt_push_documented(lua_State *L, lua_CFunction fn, int nup, const char *sig, const char *desc,
                        const char *op) {
  lua_pushcclosure(L, fn, nup);
  if (!desc) {
    const eng_op_def_t *def = op ? eng_op_find(op, NULL) : NULL;
    desc = def && def->doc ? def->doc : "";
  }
  lua_pushfstring(L, "%s\n\n%s", sig, desc);
  lt_doc_set(L, -2, lua_tostring(L, -1));
  lua_pop(L, 1);
}

void lt_register(lua_State *L, int table, int also, const lt_reg_t *regs) {
  for (const lt_reg_t *r = regs; r->name; r++) {
    lt_push_documented(L, r->fn, 0, r->sig, r->desc, r->op);
    if (also) {
      lua_pushvalue(L, -1);
      lua_setfield(L, also, r->name);
    }
    lua_setfield(L, table, r->name);
  }
}

void lt_open_docs(lua_State *L, int engine) {
  lua_pushlightuserdata(L, (void *)&docs_key);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_setfield(L, engine, "docs");
  lua_rawset(L, LUA_REGISTRYINDEX);
}
