/* The read-eval-print loop: expressions print their values, incomplete statements continue on
 * the next line, errors print and return to the prompt. */
#include <lauxlib.h>
#include <luajit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"

#define PROMPT "> "
#define PROMPT_MORE ">> "
#define CHUNKNAME "=stdin"

typedef enum { CHUNK_EXPRESSION, CHUNK_READY, CHUNK_NONE, CHUNK_EOF } chunk_status_t;

/* Prints the error message on top of the stack and pops it. */
static void report(lua_State *L) {
  const char *msg = lua_tostring(L, -1);
  fflush(stdout);
  fprintf(stderr, "%s\n", msg ? msg : "(error object is not a string)");
  fflush(stderr);
  lua_pop(L, 1);
}

/* A syntax error that only says the input ended early: more lines may complete it. */
static int incomplete(lua_State *L, int status) {
  static const char mark[] = "'<eof>'";
  size_t len, n = sizeof mark - 1;
  if (status != LUA_ERRSYNTAX) return 0;
  const char *msg = lua_tolstring(L, -1, &len);
  return msg && len >= n && strcmp(msg + len - n, mark) == 0;
}

static int load(lua_State *L, const char *code, size_t len) {
  return luaL_loadbuffer(L, code, len, CHUNKNAME);
}

/* Returns its arguments: the chunk of an expression line passes its values through it. */
static int pass_values(lua_State *L) { return lua_gettop(L); }

/* A line that is an expression prints its value: try it as a return statement first, as lua.c
 * 5.2+ does. Not `return <line>` itself: that tail-calls `f()` in `f()`, and an error inside then
 * loses the "stdin:1:" position, so the chunk returns pass_values(<line>), received as `...`.
 * The newline keeps a trailing comment from eating the ')'. Pushes the function and returns 1
 * when that compiles. */
static int load_expression(lua_State *L, const char *line) {
  static const char head[] = "return (...)(", tail[] = "\n)";
  size_t n = strlen(line), nh = sizeof head - 1, nt = sizeof tail - 1;
  char *code = malloc(nh + n + nt + 1);
  if (!code) return 0;
  memcpy(code, head, nh);
  memcpy(code + nh, line, n);
  memcpy(code + nh + n, tail, nt + 1);
  int ok = load(L, code, nh + n + nt) == 0;
  free(code);
  if (!ok) lua_pop(L, 1);
  return ok;
}

/* Appends "\n" and line to *buf (of length *len). Returns 0 when out of memory. */
static int append_line(char **buf, size_t *len, const char *line) {
  size_t n = strlen(line);
  char *grown = realloc(*buf, *len + n + 2);
  if (!grown) return 0;
  grown[*len] = '\n';
  memcpy(grown + *len + 1, line, n + 1);
  *buf = grown;
  *len += n + 1;
  return 1;
}

/* Reads more lines while buf only lacks its end, then pushes the compiled chunk (CHUNK_READY) or
 * reports the syntax error (CHUNK_NONE). Takes buf over. */
static chunk_status_t complete_chunk(lua_State *L, char *buf) {
  size_t len = strlen(buf);
  chunk_status_t result = CHUNK_NONE;
  for (;;) {
    int status = load(L, buf, len);
    if (status == 0) {
      result = CHUNK_READY;
      break;
    }
    if (!incomplete(L, status)) {
      report(L);
      break;
    }
    char *line;
    host_line_status_t st = host_read_line(PROMPT_MORE, &line);
    if (st != LINE_OK) {
      /* Ctrl-C drops the statement; end of input shows what it lacked, as lua.c does. */
      if (st == LINE_EOF) {
        report(L);
        result = CHUNK_EOF;
      } else {
        lua_pop(L, 1);
      }
      break;
    }
    lua_pop(L, 1);
    host_history_add(line);
    int ok = append_line(&buf, &len, line);
    free(line);
    if (!ok) {
      fputs("engine: out of memory\n", stderr);
      break;
    }
  }
  free(buf);
  return result;
}

static chunk_status_t read_chunk(lua_State *L) {
  char *line;
  host_line_status_t st = host_read_line(PROMPT, &line);
  if (st == LINE_EOF) return CHUNK_EOF;
  if (st == LINE_INTERRUPTED) return CHUNK_NONE;
  host_history_add(line);
  /* "=expr" as in the LuaJIT and Lua 5.1 REPLs; as a statement, the '=' is a syntax error */
  if (load_expression(L, line[0] == '=' ? line + 1 : line)) {
    free(line);
    return CHUNK_EXPRESSION;
  }
  return complete_chunk(L, line);
}

/* Runs the compiled chunk on top (an expression line's chunk gets pass_values as `...`) and
 * prints what it returns, through print(). */
static void run_chunk(lua_State *L, int expression) {
  /* Interpreted, so that Ctrl-C can stop even `while true do end`: JIT-compiled loops never
   * look at the interrupt hook. Code that the REPL line calls (the engine's Lua) keeps the JIT. */
  luaJIT_setmode(L, -1, LUAJIT_MODE_ALLFUNC | LUAJIT_MODE_OFF);
  int base = lua_gettop(L) - 1;
  if (expression) lua_pushcfunction(L, pass_values);
  if (host_pcall(L, expression, LUA_MULTRET) != 0) {
    report(L);
    return;
  }
  int n = lua_gettop(L) - base;
  if (n == 0) return;
  lua_pushliteral(L, "print");
  lua_rawget(L, LUA_GLOBALSINDEX);
  lua_insert(L, base + 1);
  if (host_pcall(L, n, 0) != 0) report(L);
}

static void banner(void) {
  char device[32];
  printf("engine %s (%s), default device %s. help() lists topics, Tab completes, Ctrl-D exits.\n",
         ENG_VERSION, LUAJIT_VERSION, eng_device_name(eng_device_default(), device, sizeof device));
  fflush(stdout);
}

int host_repl(eng_engine_t *e) {
  lua_State *L = eng_engine_lua(e);
  banner();
  host_help_register(L);
  host_complete_init(L);
  host_input_init();
  host_history_open();
  chunk_status_t st;
  while ((st = read_chunk(L)) != CHUNK_EOF) {
    if (st == CHUNK_READY || st == CHUNK_EXPRESSION) run_chunk(L, st == CHUNK_EXPRESSION);
    lua_settop(L, 0);
  }
  fputc('\n', stdout);
  fflush(stdout);
  host_history_close();
  return 0;
}
