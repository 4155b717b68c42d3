/* One line of REPL input through readline's callback interface. readline() itself would handle
 * SIGINT by re-raising it after cleaning up, which cannot express "Ctrl-C clears the line"; with
 * the callback interface we wait in poll() ourselves. The SIGINT handler writes a byte to a pipe
 * that poll() also watches (the self-pipe trick): readline changes the signal mask and waits
 * inside its own reads, so neither EINTR nor a blocked-signal window can be relied on. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <readline/readline.h>

#include "host/host.h"

static volatile sig_atomic_t got_sigint;
static int wake[2] = {-1, -1}; /* the handler writes to wake[1] */
static char *accepted;
static int done;

static void on_sigint(int sig) {
  (void)sig;
  int saved = errno;
  got_sigint = 1;
  ssize_t n = write(wake[1], "", 1); /* a full pipe already wakes poll() */
  (void)n;
  errno = saved;
}

static void drain_wake(void) {
  char buf[64];
  while (read(wake[0], buf, sizeof buf) > 0) {
  }
}

static void on_line(char *line) {
  accepted = line;
  done = 1;
  rl_callback_handler_remove();
}

void host_input_init(void) {
  rl_readline_name = "engine";
  rl_catch_signals = 0; /* SIGINT is ours, see above */
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    perror("engine: pipe");
    wake[0] = wake[1] = -1;
  }
  struct sigaction act;
  act.sa_handler = on_sigint;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;
  sigaction(SIGINT, &act, NULL);
}

/* Ctrl-C: forget the partial line and put the terminal back as readline found it. */
static void drop_line(void) {
  rl_free_line_state();
  rl_callback_sigcleanup();
  rl_cleanup_after_signal();
  rl_callback_handler_remove();
  FILE *out = rl_outstream ? rl_outstream : stdout;
  fputs("^C\n", out);
  fflush(out);
}

static host_line_status_t read_loop(void) {
  while (!done) {
    if (got_sigint) {
      got_sigint = 0;
      drain_wake();
      drop_line();
      return LINE_INTERRUPTED;
    }
    struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                          {.fd = wake[0], .events = POLLIN}};
    int r = poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (p[0].revents & POLLNVAL)) {
      rl_callback_handler_remove();
      return LINE_EOF;
    }
    if (p[1].revents & POLLIN) continue; /* got_sigint is set */
    rl_callback_read_char();             /* on POLLHUP this reads EOF and calls on_line(NULL) */
  }
  return accepted ? LINE_OK : LINE_EOF;
}

host_line_status_t host_read_line(const char *prompt, char **line) {
  accepted = NULL;
  done = 0;
  got_sigint = 0; /* a Ctrl-C from before this prompt has been dealt with */
  drain_wake();
  rl_callback_handler_install(prompt, on_line);
  host_line_status_t status = read_loop();
  *line = status == LINE_OK ? accepted : NULL;
  return status;
}
