/* The REPL, driven through a pseudo-terminal as a person would: auto-printing, multi-line input,
 * errors, Ctrl-C, Tab completion, history and help. Every wait has a deadline. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

#define DEADLINE_MS 10000

typedef struct {
  pid_t pid;
  int fd;
  char *out; /* everything the REPL wrote, '\r' removed */
  size_t len, cap;
  size_t mark; /* expectations match after this offset */
} repl_t;

static char dir[64];
static char history[128];

static void make_dir(void) {
  strcpy(dir, "/tmp/engine_repl_XXXXXX");
  cr_assert(mkdtemp(dir) != NULL, "mkdtemp failed");
  snprintf(history, sizeof history, "%s/history", dir);
}

static void remove_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert(system(cmd) == 0);
}

TestSuite(repl, .init = make_dir, .fini = remove_dir);

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Starts `engine` on a new pseudo-terminal with ENGINE_HISTORY=history_file. */
static void repl_start(repl_t *r, const char *history_file) {
  memset(r, 0, sizeof *r);
  struct winsize ws = {.ws_row = 24, .ws_col = 200};
  r->pid = forkpty(&r->fd, NULL, NULL, &ws);
  cr_assert(r->pid >= 0, "forkpty failed: %s", strerror(errno));
  if (r->pid == 0) {
    setenv("ENGINE_HISTORY", history_file, 1);
    setenv("TERM", "dumb", 1);
    setenv("INPUTRC", "/dev/null", 1);
    execl(ENGINE_BIN, "engine", (char *)NULL);
    _exit(127);
  }
}

static void repl_kill(repl_t *r) {
  if (r->pid > 0) {
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
    r->pid = 0;
  }
  if (r->fd >= 0) close(r->fd);
  r->fd = -1;
}

/* Reads what is available within ms milliseconds. Returns 0 at end of output. */
static int repl_read(repl_t *r, int ms) {
  struct pollfd p = {.fd = r->fd, .events = POLLIN};
  if (poll(&p, 1, ms) <= 0) return 1;
  char buf[4096];
  ssize_t n = read(r->fd, buf, sizeof buf);
  if (n <= 0) return 0; /* EIO once the child has closed the terminal */
  if (r->len + (size_t)n + 1 > r->cap) {
    r->cap = 2 * (r->len + (size_t)n + 1);
    r->out = realloc(r->out, r->cap);
  }
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] != '\r') r->out[r->len++] = buf[i];
  r->out[r->len] = 0;
  return 1;
}

/* Waits until needle appears after the mark, then moves the mark past it. Fails the test (with
 * the whole transcript) at the deadline. */
static void repl_expect(repl_t *r, const char *needle) {
  long end = now_ms() + DEADLINE_MS;
  for (;;) {
    char *hit = r->out ? strstr(r->out + r->mark, needle) : NULL;
    if (hit) {
      r->mark = (size_t)(hit - r->out) + strlen(needle);
      return;
    }
    long left = end - now_ms();
    if (left <= 0 || !repl_read(r, (int)(left < 100 ? left : 100))) break;
  }
  char *transcript = strdup(r->out ? r->out : "");
  size_t mark = r->mark;
  repl_kill(r);
  cr_assert_fail("REPL output lacks '%s' after offset %zu; transcript:\n%s", needle, mark,
                 transcript);
}

static void repl_send(repl_t *r, const char *text) {
  size_t n = strlen(text);
  cr_assert_eq(write(r->fd, text, n), (ssize_t)n, "write to the REPL failed");
}

/* Ctrl-D at the prompt; returns the exit status once the REPL has ended. */
static int repl_finish(repl_t *r) {
  repl_send(r, "\x04");
  long end = now_ms() + DEADLINE_MS;
  int status;
  while (waitpid(r->pid, &status, WNOHANG) == 0) {
    if (now_ms() > end) {
      repl_kill(r);
      cr_assert_fail("the REPL did not exit after Ctrl-D");
    }
    repl_read(r, 50);
  }
  r->pid = 0;
  close(r->fd);
  free(r->out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Starts a REPL and waits for its first prompt. */
static void repl_open(repl_t *r) {
  repl_start(r, history);
  repl_expect(r, "engine " ENG_VERSION);
  repl_expect(r, "> ");
}

/* The REPL still evaluates: the output must be computed, not the echo of the input. */
static void expect_alive(repl_t *r) {
  repl_send(r, "print('al' .. 'ive')\n");
  repl_expect(r, "\nalive\n> ");
}

Test(repl, expressions_print_their_values) {
  repl_t r;
  repl_open(&r);
  repl_send(&r, "1+2\n");
  repl_expect(&r, "\n3\n> ");
  repl_send(&r, "'a', 2, nil\n");
  repl_expect(&r, "\na\t2\tnil\n> ");
  repl_send(&r, "=10*10\n");
  repl_expect(&r, "\n100\n> ");
  /* a statement prints nothing */
  repl_send(&r, "x = 5\n");
  repl_expect(&r, "x = 5\n> ");
  repl_send(&r, "x\n");
  repl_expect(&r, "\n5\n> ");
  cr_assert_eq(repl_finish(&r), 0);
}

Test(repl, incomplete_statements_continue) {
  repl_t r;
  repl_open(&r);
  repl_send(&r, "function f(x)\n");
  repl_expect(&r, "\n>> ");
  repl_send(&r, "return x*2\n");
  repl_expect(&r, "\n>> ");
  repl_send(&r, "end\n");
  repl_expect(&r, "end\n> ");
  repl_send(&r, "f(21)\n");
  repl_expect(&r, "\n42\n> ");
  repl_send(&r, "for i = 1, 2 do\n");
  repl_expect(&r, "\n>> ");
  repl_send(&r, "print('i=' .. i) end\n");
  repl_expect(&r, "\ni=1\ni=2\n> ");
  cr_assert_eq(repl_finish(&r), 0);
}

Test(repl, syntax_error_is_reported_at_once) {
  repl_t r;
  repl_open(&r);
  repl_send(&r, "x = = 1\n");
  repl_expect(&r, "x = = 1\nstdin:1: unexpected symbol");
  repl_expect(&r, "\n> ");
  expect_alive(&r);
  cr_assert_eq(repl_finish(&r), 0);
}

Test(repl, runtime_error_returns_to_the_prompt) {
  repl_t r;
  repl_open(&r);
  repl_send(&r, "error('bo' .. 'om')\n");
  repl_expect(&r, "stdin:1: boom");
  repl_expect(&r, "stack traceback");
  repl_expect(&r, "\n> ");
  expect_alive(&r);
  cr_assert_eq(repl_finish(&r), 0);
}

Test(repl, ctrl_c_stops_running_code) {
  repl_t r;
  repl_open(&r);
  repl_send(&r, "print('run' .. 'ning') while true do end\n");
  repl_expect(&r, "\nrunning\n");
  repl_send(&r, "\x03");
  repl_expect(&r, "interrupted!");
  repl_expect(&r, "\n> ");
  expect_alive(&r);
  cr_assert_eq(repl_finish(&r), 0);
}

Test(repl, ctrl_c_at_the_prompt_clears_the_line) {
  repl_t r;
  repl_open(&r);
  repl_send(&r, "this is not lua");
  repl_expect(&r, "not lua");
  repl_send(&r, "\x03");
  repl_expect(&r, "^C\n> ");
  expect_alive(&r);
  /* and drops an unfinished statement */
  repl_send(&r, "for i = 1, 2 do\n");
  repl_expect(&r, "\n>> ");
  repl_send(&r, "\x03");
  repl_expect(&r, "^C\n> ");
  expect_alive(&r);
  cr_assert_eq(repl_finish(&r), 0);
}

Test(repl, tab_completes_names_fields_and_methods) {
  repl_t r;
  repl_open(&r);
  repl_send(&r, "engine.F.tan\t");
  repl_expect(&r, "tanh(");
  repl_send(&r, "\x03");
  repl_expect(&r, "^C\n> ");
  repl_send(&r, "pri\t");
  repl_expect(&r, "print(");
  repl_send(&r, "'done')\n");
  repl_expect(&r, "\ndone\n> ");
  repl_send(&r, "x = engine.zeros{2}\n");
  repl_expect(&r, "\n> ");
  repl_send(&r, "x:is_con\t");
  repl_expect(&r, "is_contiguous(");
  repl_send(&r, ")\n");
  repl_expect(&r, "\ntrue\n> ");
  cr_assert_eq(repl_finish(&r), 0);
}

Test(repl, help_prints_documentation) {
  repl_t r;
  repl_open(&r);
  repl_send(&r, "help(engine.zeros)\n");
  repl_expect(&r, "\nengine.zeros(");
  repl_expect(&r, "\n> ");
  cr_assert_eq(repl_finish(&r), 0);
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert(f != NULL, "cannot read %s", path);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

Test(repl, history_is_saved_and_reloaded) {
  repl_t r;
  repl_open(&r);
  repl_send(&r, "saved_value = 123\n");
  repl_expect(&r, "\n> ");
  cr_assert_eq(repl_finish(&r), 0);
  cr_assert(strstr(read_text(history), "saved_value = 123\n") != NULL, "history file: %s",
            read_text(history));
  /* a new session recalls it: Ctrl-P is the previous line */
  repl_open(&r);
  repl_send(&r, "\x10\n");
  repl_expect(&r, "saved_value = 123\n> ");
  repl_send(&r, "saved_value + 1\n");
  repl_expect(&r, "\n124\n> ");
  cr_assert_eq(repl_finish(&r), 0);
}

Test(repl, history_is_bounded) {
  FILE *f = fopen(history, "w");
  cr_assert(f != NULL);
  for (int i = 0; i < 1500; i++) fprintf(f, "old_%d = %d\n", i, i);
  fclose(f);
  repl_t r;
  repl_open(&r);
  repl_send(&r, "new_line = 1\n");
  repl_expect(&r, "\n> ");
  cr_assert_eq(repl_finish(&r), 0);
  const char *text = read_text(history);
  int lines = 0;
  for (const char *p = text; *p; p++) lines += *p == '\n';
  cr_assert(lines <= 1000, "history has %d lines", lines);
  cr_assert(strstr(text, "new_line = 1\n") != NULL);
  cr_assert(strstr(text, "old_1499 = 1499\n") != NULL);
  cr_assert(strstr(text, "old_1 = 1\n") == NULL);
}

Test(repl, unusable_history_file_is_only_a_warning) {
  repl_t r;
  char bad[192];
  snprintf(bad, sizeof bad, "%s/no_such_dir/history", dir);
  repl_start(&r, bad);
  repl_expect(&r, "warning");
  repl_expect(&r, "> ");
  expect_alive(&r);
  cr_assert_eq(repl_finish(&r), 0);
}
