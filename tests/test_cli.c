/* The `engine` command line: options, scripts and their arguments, errors and exit codes, stdin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

static char dir[64];

static void make_dir(void) {
  strcpy(dir, "/tmp/engine_cli_XXXXXX");
  cr_assert(mkdtemp(dir) != NULL, "mkdtemp failed");
}

static void remove_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert(system(cmd) == 0);
}

TestSuite(cli, .init = make_dir, .fini = remove_dir);

/* Writes a file in the test directory; returns its path (static buffer). */
static const char *write_file(const char *name, const char *text) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert(f != NULL, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
  return path;
}

/* Runs `engine <args>` through the shell (stdout and stderr together); returns the exit status. */
static int engine(const char *args, char **out) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s' %s", ENGINE_BIN, args);
  return t_run_capture(cmd, out);
}

#define ASSERT_HAS(out, needle) \
  cr_assert(strstr((out), (needle)) != NULL, "output lacks '%s':\n%s", (needle), (out))

Test(cli, version) {
  char *out;
  cr_assert_eq(engine("--version", &out), 0);
  ASSERT_HAS(out, "engine " ENG_VERSION " (LuaJIT 2.1");
  free(out);
  cr_assert_eq(engine("-v", &out), 0);
  ASSERT_HAS(out, "engine " ENG_VERSION);
  free(out);
}

Test(cli, help_lists_commands_options_environment_examples) {
  char *out;
  cr_assert_eq(engine("--help", &out), 0);
  ASSERT_HAS(out, "usage: engine");
  ASSERT_HAS(out, "engine run FILE");
  ASSERT_HAS(out, "-e CODE");
  ASSERT_HAS(out, "ENGINE_HISTORY");
  ASSERT_HAS(out, "examples:");
  free(out);
}

Test(cli, e_runs_code_in_order) {
  char *out;
  cr_assert_eq(engine("-e 'print(1+1)'", &out), 0);
  cr_assert_str_eq(out, "2\n");
  free(out);
  cr_assert_eq(engine("-e 'x = 20' -e 'print(x + 22)'", &out), 0);
  cr_assert_str_eq(out, "42\n");
  free(out);
}

Test(cli, e_sees_the_engine_and_require_gives_the_same_table) {
  char *out;
  cr_assert_eq(engine("-e 'print(type(engine), require(\"engine\") == engine)'", &out), 0);
  cr_assert_str_eq(out, "table\ttrue\n");
  free(out);
}

Test(cli, e_error_exits_1_with_position) {
  char *out;
  cr_assert_eq(engine("-e 'error(\"bad\")'", &out), 1);
  ASSERT_HAS(out, "(command line):1: bad");
  ASSERT_HAS(out, "stack traceback");
  free(out);
  cr_assert_eq(engine("-e 'x ='", &out), 1);
  ASSERT_HAS(out, "(command line):1:");
  free(out);
}

Test(cli, e_code_runs_before_the_script) {
  const char *script = write_file("after_e.lua", "print('y is ' .. y)\n");
  char args[512], *out;
  snprintf(args, sizeof args, "-e 'y = 5' '%s'", script);
  cr_assert_eq(engine(args, &out), 0);
  cr_assert_str_eq(out, "y is 5\n");
  free(out);
}

static const char args_script[] =
    "print('n=' .. #arg, 'arg0=' .. arg[0], 'arg1=' .. arg[1], 'arg2=' .. arg[2])\n"
    "print('dots=' .. select('#', ...), ...)\n";

Test(cli, run_passes_arg_and_dots) {
  const char *script = write_file("args.lua", args_script);
  char args[512], expect[512], *out;
  snprintf(args, sizeof args, "run '%s' foo 'b r'", script);
  cr_assert_eq(engine(args, &out), 0);
  snprintf(expect, sizeof expect, "n=2\targ0=%s\targ1=foo\targ2=b r\ndots=2\tfoo\tb r\n", script);
  cr_assert_str_eq(out, expect);
  free(out);
}

Test(cli, a_lua_file_as_first_argument_is_run) {
  const char *script = write_file("direct.lua", args_script);
  char args[512], expect[512], *out;
  snprintf(args, sizeof args, "'%s' 1 2", script);
  cr_assert_eq(engine(args, &out), 0);
  snprintf(expect, sizeof expect, "n=2\targ0=%s\targ1=1\targ2=2\ndots=2\t1\t2\n", script);
  cr_assert_str_eq(out, expect);
  free(out);
}

Test(cli, script_error_exits_1_with_traceback) {
  const char *script = write_file("err.lua",
                                  "local function explode()\n"
                                  "  error('boom')\n"
                                  "end\n"
                                  "explode()\n");
  char args[512], needle[512], *out;
  snprintf(args, sizeof args, "run '%s'", script);
  cr_assert_eq(engine(args, &out), 1);
  snprintf(needle, sizeof needle, "%s:2: boom", script);
  ASSERT_HAS(out, needle);
  ASSERT_HAS(out, "stack traceback");
  snprintf(needle, sizeof needle, "%s:4: in main chunk", script);
  ASSERT_HAS(out, needle);
  free(out);
}

Test(cli, script_syntax_error_exits_1) {
  const char *script = write_file("syntax.lua", "x = = 1\n");
  char args[512], *out;
  snprintf(args, sizeof args, "run '%s'", script);
  cr_assert_eq(engine(args, &out), 1);
  ASSERT_HAS(out, "syntax.lua:1:");
  free(out);
}

Test(cli, missing_script_exits_1_with_a_message) {
  char args[512], *out;
  snprintf(args, sizeof args, "run '%s/none.lua'", dir);
  cr_assert_eq(engine(args, &out), 1);
  ASSERT_HAS(out, "cannot open script");
  ASSERT_HAS(out, "none.lua");
  ASSERT_HAS(out, "No such file");
  free(out);
}

Test(cli, script_exit_code_is_kept) {
  char *out;
  cr_assert_eq(engine("-e 'os.exit(3)'", &out), 3);
  free(out);
}

Test(cli, unknown_option_exits_2_with_usage_on_stderr) {
  char cmd[1024], *out;
  snprintf(cmd, sizeof cmd, "('%s' --bogus 2>/dev/null)", ENGINE_BIN);
  cr_assert_eq(t_run_capture(cmd, &out), 2);
  cr_assert_str_eq(out, "", "stdout should be empty, got: %s", out);
  free(out);
  cr_assert_eq(engine("--bogus", &out), 2);
  ASSERT_HAS(out, "unknown option '--bogus'");
  ASSERT_HAS(out, "usage: engine");
  free(out);
}

Test(cli, usage_errors_exit_2) {
  char *out;
  cr_assert_eq(engine("-e", &out), 2);
  ASSERT_HAS(out, "-e needs an argument");
  free(out);
  cr_assert_eq(engine("run", &out), 2);
  ASSERT_HAS(out, "run needs a script");
  free(out);
  cr_assert_eq(engine("frobnicate", &out), 2);
  ASSERT_HAS(out, "unknown command 'frobnicate'");
  free(out);
}

Test(cli, piped_stdin_is_run) {
  char cmd[1024], *out;
  snprintf(cmd, sizeof cmd, "printf 'local x = 6\\nprint(x * 7)\\n' | '%s'", ENGINE_BIN);
  cr_assert_eq(t_run_capture(cmd, &out), 0);
  cr_assert_str_eq(out, "42\n");
  free(out);
}

Test(cli, dash_runs_stdin_with_args) {
  char cmd[1024], *out;
  snprintf(cmd, sizeof cmd, "printf '#!/usr/bin/env engine\\nprint(...)\\n' | '%s' - a b",
           ENGINE_BIN);
  cr_assert_eq(t_run_capture(cmd, &out), 0);
  cr_assert_str_eq(out, "a\tb\n");
  free(out);
}

Test(cli, stdin_error_exits_1_with_line) {
  char cmd[1024], *out;
  snprintf(cmd, sizeof cmd, "printf 'print(1)\\nerror(\"late\")\\n' | '%s'", ENGINE_BIN);
  cr_assert_eq(t_run_capture(cmd, &out), 1);
  ASSERT_HAS(out, "1\n");
  ASSERT_HAS(out, "stdin:2: late");
  free(out);
}

Test(cli, e_without_script_does_not_read_stdin) {
  char cmd[1024], *out;
  snprintf(cmd, sizeof cmd, "echo 'print(\"from stdin\")' | '%s' -e 'print(\"from e\")'",
           ENGINE_BIN);
  cr_assert_eq(t_run_capture(cmd, &out), 0);
  cr_assert_str_eq(out, "from e\n");
  free(out);
}
