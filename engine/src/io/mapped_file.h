/* Read-only memory-mapped files of fixed-size unsigned elements (bytes, u16 or u32 tokens), and
 * the deterministic random windows a language-model dataset draws from them. Lua-free. */
#ifndef ENG_MAPPED_FILE_H
#define ENG_MAPPED_FILE_H

#include <stdint.h>

#include "eng_base.h"

typedef struct {
  const uint8_t *data; /* the mapping (NULL once closed) */
  size_t bytes;        /* file size */
  int elem_size;       /* 1, 2 or 4 (little-endian unsigned) */
  int64_t n;           /* number of whole elements */
} eng_mapped_file_t;

/* Maps `path` read-only. elem_size: 1 (bytes), 2 (u16 tokens) or 4 (u32 tokens). An empty file,
 * or one whose size is not a multiple of elem_size, is an error that names the path. */
eng_status_t eng_mapped_file_open(const char *path, int elem_size, eng_mapped_file_t *out);
void eng_mapped_file_close(eng_mapped_file_t *m);

/* Elements [start, start + len) as int64 values into out. */
eng_status_t eng_mapped_file_read(const eng_mapped_file_t *m, int64_t start, int64_t len,
                                  int64_t *out);

/* The start of random window number `index` of length len: Philox4x32-10 block `index` under key
 * `seed` gives a 64-bit value r = w0 | w1 << 32; the start is r mod (n - len + 1). The same
 * (seed, index) always gives the same window (a dataset's batch k of size B reads windows
 * kB .. kB + B - 1). The modulo bias is below (n / 2^64). Needs 1 <= len <= n. */
int64_t eng_mapped_file_window_start(const eng_mapped_file_t *m, uint64_t seed, uint64_t index,
                                     int64_t len);

/* count windows of length len, numbers first .. first + count - 1, row after row into out
 * [count * len] as int64. Errors when len is not in [1, n]. */
eng_status_t eng_mapped_file_windows(const eng_mapped_file_t *m, uint64_t seed, uint64_t first,
                                     int64_t count, int64_t len, int64_t *out);

#endif
