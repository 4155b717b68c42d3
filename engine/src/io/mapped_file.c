/* Read-only memory-mapped element files and their deterministic random windows. */
#include "io/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_tensor.h"

eng_status_t eng_mapped_file_open(const char *path, int elem_size, eng_mapped_file_t *out) {
  memset(out, 0, sizeof *out);
  if (elem_size != 1 && elem_size != 2 && elem_size != 4)
    return eng_error(ENG_ERR_ARG, "data: element size must be 1, 2 or 4 bytes, got %d", elem_size);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return eng_error(ENG_ERR_IO, "data: cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return eng_error(ENG_ERR_IO, "data: cannot stat '%s': %s", path, strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return eng_error(ENG_ERR_IO, "data: '%s' is not a regular file", path);
  }
  if (st.st_size == 0) {
    close(fd);
    return eng_error(ENG_ERR_FORMAT, "data: '%s' is empty", path);
  }
  if (st.st_size % elem_size != 0) {
    close(fd);
    return eng_error(ENG_ERR_FORMAT,
                     "data: '%s' has %lld bytes, not a whole number of %d-byte tokens", path,
                     (long long)st.st_size, elem_size);
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  close(fd); /* the mapping keeps the file */
  if (p == MAP_FAILED) return eng_error(ENG_ERR_IO, "data: cannot map '%s': %s", path, strerror(err));
  madvise(p, (size_t)st.st_size, MADV_RANDOM);
  out->data = (const uint8_t *)p;
  out->bytes = (size_t)st.st_size;
  out->elem_size = elem_size;
  out->n = (int64_t)st.st_size / elem_size;
  return ENG_OK;
}

void eng_mapped_file_close(eng_mapped_file_t *m) {
  if (m->data) munmap((void *)m->data, m->bytes);
  memset(m, 0, sizeof *m);
}

static void copy_elems(const eng_mapped_file_t *m, int64_t start, int64_t len, int64_t *out) {
  const uint8_t *p = m->data + (size_t)start * (size_t)m->elem_size;
  if (m->elem_size == 1) {
    for (int64_t i = 0; i < len; i++) out[i] = p[i];
  } else if (m->elem_size == 2) {
    for (int64_t i = 0; i < len; i++) out[i] = (int64_t)p[2 * i] | (int64_t)p[2 * i + 1] << 8;
  } else {
    for (int64_t i = 0; i < len; i++)
      out[i] = (int64_t)p[4 * i] | (int64_t)p[4 * i + 1] << 8 | (int64_t)p[4 * i + 2] << 16 |
               (int64_t)p[4 * i + 3] << 24;
  }
}

eng_status_t eng_mapped_file_read(const eng_mapped_file_t *m, int64_t start, int64_t len,
                                  int64_t *out) {
  if (!m->data) return eng_error(ENG_ERR_ARG, "data: read from a closed file");
  if (start < 0 || len < 0 || start > m->n || len > m->n - start)
    return eng_error(ENG_ERR_INDEX, "data: read of [%lld, %lld) is outside the file's %lld tokens",
                     (long long)start, (long long)(start + len), (long long)m->n);
  copy_elems(m, start, len, out);
  return ENG_OK;
}

int64_t eng_mapped_file_window_start(const eng_mapped_file_t *m, uint64_t seed, uint64_t index,
                                     int64_t len) {
  uint32_t w[4];
  eng_philox4x32(seed, index, w);
  uint64_t r = (uint64_t)w[0] | (uint64_t)w[1] << 32;
  return (int64_t)(r % (uint64_t)(m->n - len + 1));
}

eng_status_t eng_mapped_file_windows(const eng_mapped_file_t *m, uint64_t seed, uint64_t first,
                                     int64_t count, int64_t len, int64_t *out) {
  if (!m->data) return eng_error(ENG_ERR_ARG, "data: windows from a closed file");
  if (len < 1 || len > m->n)
    return eng_error(ENG_ERR_ARG,
                     "data: a window of %lld tokens does not fit in a file of %lld tokens "
                     "(seq_len + 1 must be at most the file's length)",
                     (long long)len, (long long)m->n);
  if (count < 0) return eng_error(ENG_ERR_ARG, "data: negative window count %lld", (long long)count);
  for (int64_t b = 0; b < count; b++)
    copy_elems(m, eng_mapped_file_window_start(m, seed, first + (uint64_t)b, len), len, out + b * len);
  return ENG_OK;
}
