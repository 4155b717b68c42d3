/* The REPL's help(f): prints what engine.help(f) returns (the binding keeps the documentation). */
#include <lauxlib.h>
#include <string.h>

#include "host/host.h"

static const char help_source[] =
    "help = function(...)\n"
    "  local engine = rawget(_G, 'engine') or package.loaded.engine\n"
    "  local doc = type(engine) == 'table' and rawget(engine, 'help')\n"
    "  local text = type(doc) == 'function' and doc(...)\n"
    "  print(type(text) == 'string' and text or 'no documentation')\n"
    "end\n";

int host_help_register(lua_State *L) {
  return host_run_code(L, help_source, strlen(help_source), "=help", 0, NULL);
}
