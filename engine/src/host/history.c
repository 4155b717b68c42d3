/* The REPL's persistent history. Every line is appended to the file as it is entered, so a crash
 * or os.exit() loses nothing; the file is cut back to the last HOST_HISTORY_MAX lines at start
 * and at exit. Any trouble with the file is a warning: the REPL works without it. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <readline/history.h>

#include "host/host.h"

static char *path;   /* NULL: not saving */

static void warn(const char *what, int err) {
  fflush(stdout);
  fprintf(stderr, "engine: warning: %s history file %s: %s (history is not saved)\n", what, path,
          strerror(err));
  free(path);
  path = NULL;
}

/* $ENGINE_HISTORY (empty: no file), else ~/.engine_history. */
static char *history_path(void) {
  const char *env = getenv("ENGINE_HISTORY");
  if (env) return *env ? strdup(env) : NULL;
  const char *home = getenv("HOME");
  if (!home || !*home) {
    struct passwd *pw = getpwuid(getuid());
    home = pw ? pw->pw_dir : NULL;
  }
  if (!home) return NULL;
  size_t n = strlen(home) + sizeof "/.engine_history";
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/.engine_history", home);
  return p;
}

void host_history_open(void) {
  stifle_history(HOST_HISTORY_MAX);
  if (!isatty(STDIN_FILENO)) return; /* lines piped into `engine -i` are not a person's history */
  path = history_path();
  if (!path) return;
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd < 0) {
    warn("cannot open", errno);
    return;
  }
  close(fd);
  int err = read_history(path);
  if (err == 0) err = history_truncate_file(path, HOST_HISTORY_MAX);
  if (err != 0) warn("cannot use", err);
}

static int is_blank(const char *s) {
  for (; *s; s++)
    if (*s != ' ' && *s != '\t') return 0;
  return 1;
}

void host_history_add(const char *line) {
  if (is_blank(line)) return;
  HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
  if (last && strcmp(last->line, line) == 0) return;
  add_history(line);
  if (path) {
    int err = append_history(1, path);
    if (err != 0) warn("cannot write", err);
  }
}

void host_history_close(void) {
  if (!path) return;
  int err = history_truncate_file(path, HOST_HISTORY_MAX);
  if (err != 0) warn("cannot trim", err);
  free(path);
  path = NULL;
}
