/* Running chunks for the command line: -e code, stdin and script files. Errors are reported on
 * stderr with a traceback; the caller turns them into exit status 1. */
#include <errno.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"
#include "lua/binding.h"

void host_report(const char *msg) {
  fflush(stdout);
  fprintf(stderr, "engine: %s\n", msg ? msg : "(error object is not a string)");
  fflush(stderr);
}

int host_pcall(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, eng_lua_traceback);
  lua_insert(L, base);
  host_interrupt_begin(L);
  int status = lua_pcall(L, nargs, nresults, base);
  host_interrupt_end(L);
  lua_remove(L, base);
  return status;
}

int host_run_code(lua_State *L, const char *code, size_t len, const char *chunkname, int argc,
                  const char *const *argv) {
  if (luaL_loadbuffer(L, code, len, chunkname) != 0) {
    host_report(lua_tostring(L, -1));
    lua_pop(L, 1);
    return 1;
  }
  if (!lua_checkstack(L, argc)) {
    host_report("too many arguments");
    lua_pop(L, 1);
    return 1;
  }
  for (int i = 0; i < argc; i++) lua_pushstring(L, argv[i]);
  if (host_pcall(L, argc, 0) != 0) {
    host_report(lua_tostring(L, -1));
    lua_pop(L, 1);
    return 1;
  }
  return 0;
}

int host_run_stdin(lua_State *L, int argc, const char *const *argv) {
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      host_report("out of memory reading stdin");
      return 1;
    }
    len += fread(buf + len, 1, cap - len, stdin);
    if (len < cap) break;
    char *grown = realloc(buf, cap *= 2);
    if (!grown) free(buf);
    buf = grown;
  }
  if (ferror(stdin)) {
    char msg[256];
    snprintf(msg, sizeof msg, "cannot read stdin: %s", strerror(errno));
    host_report(msg);
    free(buf);
    return 1;
  }
  /* A "#!" first line is skipped as for files; its newline stays so line numbers hold. */
  size_t skip = 0;
  if (len > 0 && buf[0] == '#')
    while (skip < len && buf[skip] != '\n') skip++;
  int status = host_run_code(L, buf + skip, len - skip, "=stdin", argc, argv);
  free(buf);
  return status;
}

int host_run_script(eng_engine_t *e, const char *path, int argc, const char *const *argv) {
  FILE *f = fopen(path, "r");
  if (!f) {
    char msg[4200];
    snprintf(msg, sizeof msg, "cannot open script '%s': %s", path, strerror(errno));
    host_report(msg);
    return 1;
  }
  fclose(f);
  lua_State *L = eng_engine_lua(e);
  host_interrupt_begin(L);
  int status = eng_engine_run_file(e, path, argc, argv);
  host_interrupt_end(L);
  if (status != 0) {
    host_report(eng_engine_last_error(e));
    return 1;
  }
  return 0;
}
