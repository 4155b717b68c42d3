/* Atomic file replacement: write into a temporary file beside the target, then fsync and rename
 * it over the target. Until the commit succeeds an existing target is never touched, and on any
 * failure the temporary file is removed. */
#ifndef ENG_ATOMIC_FILE_H
#define ENG_ATOMIC_FILE_H

#include <stdio.h>

#include "eng_base.h"

typedef struct {
  FILE *f;         /* write here */
  char *path;      /* the target */
  char *tmp_path;  /* the temporary file, in the target's directory */
  int failed;      /* a write failed (errno kept in err) */
  int err;
} eng_atomic_file_t;

/* Creates the temporary file. `op` starts error messages ("save: <path>: ..."). */
eng_status_t eng_atomic_open(const char *op, const char *path, eng_atomic_file_t *af);
/* Writes n bytes; a failure is remembered and reported by eng_atomic_commit. */
void eng_atomic_write(eng_atomic_file_t *af, const void *data, size_t n);
/* Flushes, fsyncs, closes and renames over the target (then fsyncs the directory). On failure
 * the temporary file is removed and the target left as it was. Frees af's resources either way. */
eng_status_t eng_atomic_commit(const char *op, eng_atomic_file_t *af);
/* Drops the temporary file without touching the target. */
void eng_atomic_abort(eng_atomic_file_t *af);

#endif
