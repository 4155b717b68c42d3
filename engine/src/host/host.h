/* The `engine` command-line host (CLI and REPL): what its files share. */
#ifndef ENG_HOST_H
#define ENG_HOST_H

#include <lua.h>
#include <stddef.h>

#include "engine.h"

/* ---- interrupt.c: Ctrl-C while Lua code runs ---- */

/* Between begin and end, SIGINT makes the running Lua code raise "interrupted!" (a hook, as lua.c
 * does); a second SIGINT before the hook fires ends the process. end restores the handler that
 * was there before begin. */
void host_interrupt_begin(lua_State *L);
void host_interrupt_end(lua_State *L);

/* ---- run.c: running chunks and reporting errors ---- */

/* Prints "engine: msg" on stderr (after flushing stdout, so the two stay in order). */
void host_report(const char *msg);
/* lua_pcall of the function below the nargs arguments on top, with a traceback handler and Ctrl-C
 * interruption. On error returns non-zero and leaves the message (with traceback) on top. */
int host_pcall(lua_State *L, int nargs, int nresults);
/* Compiles and runs code as chunk `chunkname` (a lua_load name such as "=stdin"), passing args as
 * `...`. Returns 0, or 1 after reporting the error. */
int host_run_code(lua_State *L, const char *code, size_t len, const char *chunkname, int argc,
                  const char *const *argv);
/* Runs the whole of stdin as one chunk. Returns 0, or 1 after reporting the error. */
int host_run_stdin(lua_State *L, int argc, const char *const *argv);
/* Runs a script through eng_engine_run_file. Returns 0, or 1 after reporting the error. */
int host_run_script(eng_engine_t *e, const char *path, int argc, const char *const *argv);

/* ---- repl.c: the interactive loop ---- */

/* Runs the REPL until end of input. Returns the process exit status. */
int host_repl(eng_engine_t *e);

/* ---- line_input.c: one line from readline, with Ctrl-C handling ---- */

typedef enum { LINE_OK, LINE_EOF, LINE_INTERRUPTED } host_line_status_t;

/* Sets readline up for the REPL and makes SIGINT clear the line being typed (until the process
 * ends: code that runs in between installs its own handler for its duration). */
void host_input_init(void);
/* Reads one line (malloc'd, without its newline) showing prompt. LINE_INTERRUPTED: Ctrl-C
 * discarded what was typed; LINE_EOF: Ctrl-D on an empty line or end of input. */
host_line_status_t host_read_line(const char *prompt, char **line);

/* ---- history.c: the persistent history file ---- */

/* Loads $ENGINE_HISTORY (or ~/.engine_history), creating it when missing; only when stdin is a
 * terminal. A file that cannot be used is a warning, and the REPL goes on without saving. */
void host_history_open(void);
/* Adds a non-blank line to the history and appends it to the file. */
void host_history_add(const char *line);
/* Bounds the file to the last HOST_HISTORY_MAX lines. */
void host_history_close(void);
#define HOST_HISTORY_MAX 1000

/* ---- complete.c: Tab completion ---- */

/* Completes global names, keywords and fields after '.' or ':' by looking into L's values. */
void host_complete_init(lua_State *L);

/* ---- help.c ---- */

/* Defines the REPL's global help(f): prints engine.help(f), or "no documentation". Returns 0, or
 * 1 after reporting an error. */
int host_help_register(lua_State *L);

#endif
