/* `engine`: runs Lua scripts, one-liners and stdin with the engine loaded, or starts the REPL.
 * Exit status: 0 success, 1 a Lua error or unreadable script, 2 a usage error. */
#include <luajit.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "host/host.h"

#define EXIT_LUA_ERROR 1
#define EXIT_USAGE 2

static const char synopsis[] =
    "usage: engine [options] [run] [FILE.lua [args...]]\n"
    "       engine [options] - [args...]\n";

static const char usage_text[] =
    "\n"
    "Runs Lua (LuaJIT) with the engine loaded as the global `engine` (tensors and kernels;\n"
    "`require \"engine\"` returns the same table).\n"
    "\n"
    "commands:\n"
    "  engine                     the REPL when stdin is a terminal, else run all of stdin\n"
    "  engine run FILE [args...]  run a script: `arg` is {[0] = FILE, args...}, `...` is args\n"
    "  engine FILE.lua [args...]  the same as `engine run FILE.lua [args...]`\n"
    "  engine - [args...]         run all of stdin as one chunk (args as `...`)\n"
    "\n"
    "options:\n"
    "  -e CODE        run CODE; may be repeated, runs in order before any script\n"
    "  -i             enter the REPL after the script or -e code has run\n"
    "  -v, --version  print the version and exit\n"
    "  -h, --help     print this help and exit\n"
    "\n"
    "the REPL: an expression prints its values; an unfinished statement continues on a \">>\"\n"
    "  line; Tab completes names, fields and methods (engine.F.ta<Tab>); help(f) shows the\n"
    "  documentation of f and help() lists topics; Ctrl-C stops running code or clears the line;\n"
    "  Ctrl-D exits. Code typed at the prompt runs without the JIT so that Ctrl-C can stop it.\n"
    "\n"
    "environment:\n"
    "  ENGINE_HISTORY       REPL history file (default ~/.engine_history; set but empty: none)\n"
    "  LUA_PATH, LUA_CPATH  where `require` looks for other Lua and C modules\n"
    "\n"
    "exit status: 0 success, 1 a Lua error or a script that cannot be read, 2 a usage error.\n"
    "\n"
    "examples:\n"
    "  engine run scripts/main.lua\n"
    "  engine -e 'print(engine.randn{2, 3})'\n"
    "  echo 'print(engine.ones{3}:sum():item())' | engine\n"
    "  engine -i -e 'x = engine.randn{4, 4}'\n";

typedef struct {
  const char **code;  /* the -e chunks, in order (room for argc) */
  int n_code;
  int interactive;    /* -i */
  const char *script; /* NULL, "-" for stdin, or a file */
  int argc;           /* the script's arguments */
  const char *const *argv;
} options_t;

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("engine: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fputs(synopsis, stderr);
  fputs("Try 'engine --help' for more.\n", stderr);
  return EXIT_USAGE;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Fills o from the command line. Returns -1 to go on, or an exit status (after --help, a usage
 * error, ...). */
static int parse_args(int argc, char **argv, options_t *o) {
  int i = 1;
  for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-e") == 0) {
      if (i + 1 >= argc) return usage_error("%s needs an argument (the code to run)", a);
      o->code[o->n_code++] = argv[++i];
    } else if (strcmp(a, "-i") == 0) {
      o->interactive = 1;
    } else if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) {
      printf("engine %s (%s)\n", ENG_VERSION, LUAJIT_VERSION);
      return 0;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(synopsis, stdout);
      fputs(usage_text, stdout);
      return 0;
    } else {
      return usage_error("unknown option '%s'", a);
    }
  }
  if (i == argc) return -1;
  const char *first = argv[i];
  if (strcmp(first, "run") == 0) {
    if (++i == argc) return usage_error("%s needs a script: engine run FILE [args...]", first);
  } else if (strcmp(first, "-") != 0 && !ends_with(first, ".lua")) {
    return usage_error("unknown command '%s' (scripts: engine run FILE, or engine FILE.lua)",
                       first);
  }
  o->script = argv[i];
  o->argc = argc - i - 1;
  o->argv = (const char *const *)argv + i + 1;
  return -1;
}

static int run(eng_engine_t *e, const options_t *o) {
  lua_State *L = eng_engine_lua(e);
  for (int i = 0; i < o->n_code; i++)
    if (host_run_code(L, o->code[i], strlen(o->code[i]), "=(command line)", 0, NULL) != 0)
      return EXIT_LUA_ERROR;
  int status = 0;
  if (o->script && strcmp(o->script, "-") == 0)
    status = host_run_stdin(L, o->argc, o->argv);
  else if (o->script)
    status = host_run_script(e, o->script, o->argc, o->argv);
  else if (o->n_code == 0 && !o->interactive && !isatty(STDIN_FILENO))
    status = host_run_stdin(L, 0, NULL);
  if (status != 0) return EXIT_LUA_ERROR;
  if (o->interactive || (!o->script && o->n_code == 0 && isatty(STDIN_FILENO)))
    return host_repl(e);
  return 0;
}

int main(int argc, char **argv) {
  const char *code[argc];
  options_t o = {.code = code};
  int status = parse_args(argc, argv, &o);
  if (status >= 0) return status;
  eng_engine_t *e = eng_engine_new();
  if (!e) {
    fprintf(stderr, "engine: cannot start the engine: %s\n", eng_last_error());
    return EXIT_LUA_ERROR;
  }
  status = run(e, &o);
  fflush(stdout);
  eng_engine_free(e);
  return status;
}
