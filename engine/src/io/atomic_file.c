/* Temporary file + fsync + rename, so a crash or a failed write never leaves a half-written
 * target behind. */
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The directory part of path ("." when there is none). */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  if (slash == path) return strdup("/");
  return strndup(path, (size_t)(slash - path));
}

static void release(eng_atomic_file_t *af) {
  free(af->path);
  free(af->tmp_path);
  memset(af, 0, sizeof *af);
}

eng_status_t eng_atomic_open(const char *op, const char *path, eng_atomic_file_t *af) {
  memset(af, 0, sizeof *af);
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  if (!*base) return eng_error(ENG_ERR_ARG, "%s: '%s' does not name a file", op, path);
  char *dir = dir_of(path);
  size_t n = (dir ? strlen(dir) : 0) + strlen(base) + 16;
  af->path = strdup(path);
  af->tmp_path = malloc(n);
  if (!dir || !af->path || !af->tmp_path) {
    free(dir);
    release(af);
    return eng_error(ENG_ERR_OOM, "%s: %s: out of memory", op, path);
  }
  snprintf(af->tmp_path, n, "%s/.%s.XXXXXX", dir, base);
  int fd = mkstemp(af->tmp_path);
  if (fd < 0) {
    eng_status_t st = eng_error(ENG_ERR_IO, "%s: %s: cannot create a temporary file in %s: %s", op,
                                path, dir, strerror(errno));
    free(dir);
    release(af);
    return st;
  }
  free(dir);
  /* mkstemp makes the file 0600; keep a replaced file's permissions, else the usual 0644 */
  struct stat sb;
  fchmod(fd, stat(path, &sb) == 0 ? (sb.st_mode & 07777) : 0644);
  af->f = fdopen(fd, "wb");
  if (!af->f) {
    eng_status_t st = eng_error(ENG_ERR_IO, "%s: %s: cannot open the temporary file: %s", op, path,
                                strerror(errno));
    close(fd);
    unlink(af->tmp_path);
    release(af);
    return st;
  }
  return ENG_OK;
}

void eng_atomic_write(eng_atomic_file_t *af, const void *data, size_t n) {
  if (af->failed || n == 0) return;
  if (fwrite(data, 1, n, af->f) != n) {
    af->failed = 1;
    af->err = errno ? errno : EIO;
  }
}

eng_status_t eng_atomic_commit(const char *op, eng_atomic_file_t *af) {
  const char *stage = "write";
  int err = af->failed ? af->err : 0;
  if (!err && fflush(af->f) != 0) err = errno;
  if (!err && fsync(fileno(af->f)) != 0) err = errno, stage = "fsync";
  if (fclose(af->f) != 0 && !err) err = errno, stage = "close";
  af->f = NULL;
  if (!err && rename(af->tmp_path, af->path) != 0) err = errno, stage = "rename the temporary file over";
  if (err) {
    unlink(af->tmp_path);
    eng_status_t st = eng_error(ENG_ERR_IO, "%s: %s: cannot %s the file: %s", op, af->path, stage,
                                strerror(err));
    release(af);
    return st;
  }
  /* make the rename itself durable; file systems that cannot fsync a directory are fine as is */
  char *dir = dir_of(af->path);
  int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY) : -1;
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  free(dir);
  release(af);
  return ENG_OK;
}

void eng_atomic_abort(eng_atomic_file_t *af) {
  if (af->f) fclose(af->f);
  if (af->tmp_path) unlink(af->tmp_path);
  release(af);
}
