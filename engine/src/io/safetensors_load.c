/* Reading safetensors checkpoints. Nothing in the file is trusted: the header length, the JSON,
 * every dtype, shape and offset are checked before any tensor is allocated, and each failure is a
 * message naming the file and what is wrong. Tensor bytes are read straight into their tensors. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "eng_checkpoint.h"
#include "io/safetensors_dtype.h"

typedef struct {
  const char *name; /* borrowed from the JSON header */
  eng_dtype_t dtype;
  int ndim;
  int64_t shape[ENG_MAX_DIMS];
  int64_t begin, end; /* within the data section */
} entry_t;

/* ENG_ERR_FORMAT "load: <path>: <what>". */
__attribute__((format(printf, 2, 3))) static eng_status_t bad(const char *path, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return eng_error(ENG_ERR_FORMAT, "load: %s: %s", path, what);
}

static int read_nonneg_int(const json_t *v, int64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
  *out = (int64_t)json_integer_value(v);
  return 1;
}

static eng_status_t parse_shape(const char *path, const char *name, const json_t *shape, entry_t *e) {
  if (!json_is_array(shape)) return bad(path, "tensor '%s' has no shape array", name);
  size_t nd = json_array_size(shape);
  if (nd > ENG_MAX_DIMS)
    return bad(path, "tensor '%s' has %zu dims (at most %d are supported)", name, nd, ENG_MAX_DIMS);
  e->ndim = (int)nd;
  for (size_t d = 0; d < nd; d++)
    if (!read_nonneg_int(json_array_get(shape, d), &e->shape[d]))
      return bad(path, "tensor '%s': shape entry %zu is not a non-negative integer", name, d);
  return ENG_OK;
}

static eng_status_t parse_entry(const char *path, const char *name, const json_t *v,
                                int64_t data_size, entry_t *e) {
  char s[128];
  e->name = name;
  if (!json_is_object(v)) return bad(path, "tensor '%s' is not a JSON object", name);
  const json_t *dt = json_object_get(v, "dtype");
  if (!json_is_string(dt)) return bad(path, "tensor '%s' has no dtype string", name);
  if (!eng_safetensors_dtype_parse(json_string_value(dt), &e->dtype))
    return bad(path, "tensor '%s' has unknown dtype \"%s\" (supported: F64 F32 F16 BF16 I32 I64 U8)",
               name, json_string_value(dt));
  eng_status_t st = parse_shape(path, name, json_object_get(v, "shape"), e);
  if (st) return st;

  const json_t *offs = json_object_get(v, "data_offsets");
  if (!json_is_array(offs) || json_array_size(offs) != 2 ||
      !read_nonneg_int(json_array_get(offs, 0), &e->begin) ||
      !read_nonneg_int(json_array_get(offs, 1), &e->end))
    return bad(path, "tensor '%s' needs data_offsets [begin, end] of two non-negative integers", name);
  if (e->begin > e->end)
    return bad(path, "tensor '%s': data_offsets [%lld, %lld] run backwards", name,
               (long long)e->begin, (long long)e->end);
  if (e->end > data_size)
    return bad(path, "tensor '%s': data_offsets [%lld, %lld] run past the data (%lld bytes)", name,
               (long long)e->begin, (long long)e->end, (long long)data_size);

  /* numel * size, refusing shapes whose byte count overflows (they cannot fit the data anyway) */
  int64_t need = (int64_t)eng_dtype_size(e->dtype);
  for (int d = 0; d < e->ndim; d++) {
    if (e->shape[d] != 0 && need > INT64_MAX / e->shape[d])
      return bad(path, "tensor '%s': shape %s is too large", name, eng_shape_str(e->shape, e->ndim, s, sizeof s));
    need *= e->shape[d];
  }
  if (e->end - e->begin != need)
    return bad(path, "tensor '%s': data_offsets [%lld, %lld] hold %lld bytes but shape %s of %s needs %lld",
               name, (long long)e->begin, (long long)e->end, (long long)(e->end - e->begin),
               eng_shape_str(e->shape, e->ndim, s, sizeof s), json_string_value(dt), (long long)need);
  return ENG_OK;
}

static int by_begin(const void *x, const void *y) {
  const entry_t *a = *(entry_t *const *)x, *b = *(entry_t *const *)y;
  if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
  return (a->end > b->end) - (a->end < b->end);
}

/* No two non-empty tensors may share bytes. */
static eng_status_t check_overlaps(const char *path, entry_t *entries, int n) {
  entry_t **sorted = malloc(sizeof *sorted * (size_t)(n ? n : 1));
  if (!sorted) return eng_error(ENG_ERR_OOM, "load: %s: out of memory", path);
  for (int k = 0; k < n; k++) sorted[k] = &entries[k];
  qsort(sorted, (size_t)n, sizeof *sorted, by_begin);
  const entry_t *prev = NULL;
  eng_status_t st = ENG_OK;
  for (int k = 0; k < n && !st; k++) {
    const entry_t *e = sorted[k];
    if (e->begin == e->end) continue;
    if (prev && e->begin < prev->end)
      st = bad(path, "tensors '%s' and '%s' overlap in the data ([%lld, %lld] and [%lld, %lld])",
               prev->name, e->name, (long long)prev->begin, (long long)prev->end,
               (long long)e->begin, (long long)e->end);
    prev = e;
  }
  free(sorted);
  return st;
}

static eng_status_t parse_metadata(const char *path, const json_t *meta, eng_safetensors_t *out) {
  if (!json_is_object(meta)) return bad(path, "__metadata__ is not a JSON object");
  size_t n = json_object_size(meta);
  out->meta_keys = calloc(n ? n : 1, sizeof(char *));
  out->meta_values = calloc(n ? n : 1, sizeof(char *));
  if (!out->meta_keys || !out->meta_values) return eng_error(ENG_ERR_OOM, "load: %s: out of memory", path);
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)meta, key, v) {
    if (!json_is_string(v)) return bad(path, "metadata value of '%s' is not a string", key);
    int k = out->n_meta;
    out->meta_keys[k] = strdup(key);
    out->meta_values[k] = strdup(json_string_value(v));
    out->n_meta++;
    if (!out->meta_keys[k] || !out->meta_values[k])
      return eng_error(ENG_ERR_OOM, "load: %s: out of memory", path);
  }
  return ENG_OK;
}

/* Reads the 8-byte length and the JSON header; checks both against the file size. */
static eng_status_t read_header(const char *path, FILE *f, int64_t file_size, json_t **root,
                                int64_t *header_len) {
  if (file_size < 8)
    return bad(path, "file is truncated (%lld bytes; the header length alone takes 8)", (long long)file_size);
  unsigned char b[8];
  if (fread(b, 1, 8, f) != 8)
    return eng_error(ENG_ERR_IO, "load: %s: cannot read the header length: %s", path, strerror(errno));
  uint64_t len = 0;
  for (int i = 0; i < 8; i++) len |= (uint64_t)b[i] << (8 * i);
  if (len > (uint64_t)(file_size - 8))
    return bad(path, "file is truncated (header says %llu bytes, file has %lld)", (unsigned long long)len,
               (long long)file_size);
  if (len >= ENG_SAFETENSORS_MAX_HEADER)
    return bad(path, "header of %llu bytes is over the %u byte limit", (unsigned long long)len,
               ENG_SAFETENSORS_MAX_HEADER);
  char *text = malloc(len ? len : 1);
  if (!text) return eng_error(ENG_ERR_OOM, "load: %s: out of memory for a %llu byte header", path,
                              (unsigned long long)len);
  if (fread(text, 1, len, f) != len) {
    free(text);
    return eng_error(ENG_ERR_IO, "load: %s: cannot read the header: %s", path, strerror(errno));
  }
  json_error_t je;
  *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  free(text);
  if (!*root)
    return bad(path, "header is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
  if (!json_is_object(*root)) {
    json_decref(*root);
    *root = NULL;
    return bad(path, "header is not a JSON object");
  }
  *header_len = (int64_t)len;
  return ENG_OK;
}

/* Validates every entry and the metadata; fills entries (n of them). */
static eng_status_t parse_header(const char *path, const json_t *root, int64_t data_size,
                                 entry_t *entries, int *n, eng_safetensors_t *out) {
  const char *key;
  const json_t *v;
  eng_status_t st = ENG_OK;
  *n = 0;
  json_object_foreach((json_t *)root, key, v) {
    if (strcmp(key, "__metadata__") == 0)
      st = parse_metadata(path, v, out);
    else
      st = parse_entry(path, key, v, data_size, &entries[(*n)++]);
    if (st) return st;
  }
  return check_overlaps(path, entries, *n);
}

/* Allocates each tensor and reads its bytes from the data section (which starts at data_start). */
static eng_status_t read_tensors(const char *path, FILE *f, int64_t data_start, const entry_t *entries,
                                 int n, eng_safetensors_t *out) {
  out->names = calloc((size_t)(n ? n : 1), sizeof(char *));
  out->tensors = calloc((size_t)(n ? n : 1), sizeof(eng_tensor_t *));
  if (!out->names || !out->tensors) return eng_error(ENG_ERR_OOM, "load: %s: out of memory", path);
  for (int k = 0; k < n; k++) {
    const entry_t *e = &entries[k];
    out->names[k] = strdup(e->name);
    out->n = k + 1;
    if (!out->names[k]) return eng_error(ENG_ERR_OOM, "load: %s: out of memory", path);
    eng_status_t st = eng_tensor_empty(e->shape, e->ndim, e->dtype, ENG_CPU_DEVICE, &out->tensors[k]);
    if (st) {
      eng_error_prefix(path);
      eng_error_prefix("load");
      return st;
    }
    size_t nbytes = (size_t)(e->end - e->begin);
    if (nbytes == 0) continue;
    errno = 0;
    if (fseeko(f, (off_t)(data_start + e->begin), SEEK_SET) != 0 ||
        fread(eng_tensor_data(out->tensors[k]), 1, nbytes, f) != nbytes)
      return eng_error(ENG_ERR_IO, "load: %s: cannot read the %zu bytes of tensor '%s': %s", path,
                       nbytes, e->name, errno ? strerror(errno) : "file shrank while reading");
  }
  return ENG_OK;
}

eng_status_t eng_safetensors_load(const char *path, eng_safetensors_t *out) {
  memset(out, 0, sizeof *out);
  if (!path || !*path) return eng_error(ENG_ERR_ARG, "load: no path given");
  FILE *f = fopen(path, "rb");
  if (!f) return eng_error(ENG_ERR_IO, "load: %s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(f);
    return eng_error(ENG_ERR_IO, "load: %s: not a regular file", path);
  }
  json_t *root = NULL;
  int64_t header_len = 0;
  eng_status_t st = read_header(path, f, (int64_t)sb.st_size, &root, &header_len);
  entry_t *entries = NULL;
  int n = 0;
  if (!st) {
    entries = calloc(json_object_size(root) + 1, sizeof *entries);
    if (!entries) st = eng_error(ENG_ERR_OOM, "load: %s: out of memory", path);
  }
  if (!st) st = parse_header(path, root, (int64_t)sb.st_size - 8 - header_len, entries, &n, out);
  if (!st) st = read_tensors(path, f, 8 + header_len, entries, n, out);
  free(entries);
  json_decref(root);
  fclose(f);
  if (st) eng_safetensors_free(out);
  return st;
}
