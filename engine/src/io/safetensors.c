/* Writing safetensors checkpoints (eng_checkpoint.h): a JSON header built with jansson, padded
 * with spaces to a multiple of 8 bytes, then each tensor's contiguous little-endian bytes in the
 * order given. The file is replaced atomically. Loading lives in safetensors_load.c. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "eng_checkpoint.h"
#include "io/atomic_file.h"
#include "io/safetensors_dtype.h"

static eng_status_t check_args(const char *path, int n, const char *const *names,
                               eng_tensor_t *const *tensors, int n_meta, const char *const *keys,
                               const char *const *values) {
  if (!path || !*path) return eng_error(ENG_ERR_ARG, "save: no path given");
  if (n < 0 || (n > 0 && (!names || !tensors)))
    return eng_error(ENG_ERR_ARG, "save: %s: bad tensor list (n = %d)", path, n);
  if (n_meta < 0 || (n_meta > 0 && (!keys || !values)))
    return eng_error(ENG_ERR_ARG, "save: %s: bad metadata list (n_meta = %d)", path, n_meta);
  for (int k = 0; k < n; k++) {
    if (!names[k] || !*names[k]) return eng_error(ENG_ERR_ARG, "save: %s: tensor %d has no name", path, k);
    if (strcmp(names[k], "__metadata__") == 0)
      return eng_error(ENG_ERR_ARG, "save: %s: '__metadata__' is reserved and cannot name a tensor", path);
    if (!tensors[k]) return eng_error(ENG_ERR_ARG, "save: %s: tensor '%s' is missing", path, names[k]);
  }
  for (int k = 0; k < n_meta; k++)
    if (!keys[k] || !values[k])
      return eng_error(ENG_ERR_ARG, "save: %s: metadata entry %d is missing its key or value", path, k);
  return ENG_OK;
}

static json_t *int_array(const int64_t *v, int n) {
  json_t *a = json_array();
  for (int i = 0; a && i < n; i++) {
    if (json_array_append_new(a, json_integer((json_int_t)v[i]))) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

static eng_status_t header_oom(const char *path) {
  return eng_error(ENG_ERR_OOM, "save: %s: out of memory building the header", path);
}

/* The metadata object; duplicate keys are an error. */
static eng_status_t add_metadata(json_t *root, const char *path, int n_meta, const char *const *keys,
                                 const char *const *values) {
  json_t *meta = json_object();
  if (!meta || json_object_set_new(root, "__metadata__", meta)) return header_oom(path);
  for (int k = 0; k < n_meta; k++) {
    if (json_object_get(meta, keys[k]))
      return eng_error(ENG_ERR_ARG, "save: %s: duplicate metadata key '%s'", path, keys[k]);
    json_t *v = json_string(values[k]);
    if (!v) return eng_error(ENG_ERR_ARG, "save: %s: metadata value of '%s' is not valid UTF-8", path, keys[k]);
    if (json_object_set_new(meta, keys[k], v))
      return eng_error(ENG_ERR_ARG, "save: %s: metadata key '%s' is not valid UTF-8", path, keys[k]);
  }
  return ENG_OK;
}

/* {"__metadata__": {...}, "name": {"dtype", "shape", "data_offsets"}, ...}: offsets consecutive
 * in the order given. */
static eng_status_t build_header(const char *path, int n, const char *const *names,
                                 eng_tensor_t *const *tensors, int n_meta, const char *const *keys,
                                 const char *const *values, json_t **out) {
  json_t *root = json_object();
  if (!root) return header_oom(path);
  eng_status_t st = n_meta > 0 ? add_metadata(root, path, n_meta, keys, values) : ENG_OK;
  int64_t at = 0;
  for (int k = 0; k < n && !st; k++) {
    const eng_tensor_t *t = tensors[k];
    if (json_object_get(root, names[k])) {
      st = eng_error(ENG_ERR_ARG, "save: %s: duplicate tensor name '%s'", path, names[k]);
      break;
    }
    int64_t offsets[2] = {at, at + (int64_t)eng_tensor_nbytes(t)};
    at = offsets[1];
    json_t *e = json_object();
    if (!e || json_object_set_new(root, names[k], e)) {
      st = eng_error(ENG_ERR_ARG, "save: %s: tensor name '%s' is not valid UTF-8", path, names[k]);
      break;
    }
    json_t *dt = json_string(eng_safetensors_dtype_name(t->dtype));
    json_t *shape = int_array(t->shape, t->ndim), *offs = int_array(offsets, 2);
    if (json_object_set_new(e, "dtype", dt) | json_object_set_new(e, "shape", shape) |
        json_object_set_new(e, "data_offsets", offs))
      st = header_oom(path);
  }
  if (st) {
    json_decref(root);
    return st;
  }
  *out = root;
  return ENG_OK;
}

/* The 8-byte little-endian header length, the header and its padding to a multiple of 8. */
static void write_header(eng_atomic_file_t *af, const char *text) {
  size_t len = strlen(text), padded = (len + 7) / 8 * 8;
  unsigned char size[8];
  for (int i = 0; i < 8; i++) size[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  eng_atomic_write(af, size, 8);
  eng_atomic_write(af, text, len);
  eng_atomic_write(af, "        ", padded - len);
}

/* A tensor's bytes, brought to the CPU and made contiguous one at a time. */
static eng_status_t write_tensor(eng_atomic_file_t *af, eng_tensor_t *t) {
  eng_tensor_t *cpu = NULL, *c = NULL;
  eng_status_t st = eng_tensor_to_device(t, ENG_CPU_DEVICE, &cpu);
  if (!st) st = eng_tensor_contiguous(cpu, &c);
  if (!st) eng_atomic_write(af, eng_tensor_data(c), eng_tensor_nbytes(c));
  eng_tensor_release(c);
  eng_tensor_release(cpu);
  return st;
}

eng_status_t eng_safetensors_save(const char *path, int n, const char *const *names,
                                  eng_tensor_t *const *tensors, int n_meta,
                                  const char *const *meta_keys, const char *const *meta_values) {
  eng_status_t st = check_args(path, n, names, tensors, n_meta, meta_keys, meta_values);
  if (st) return st;
  json_t *root = NULL;
  st = build_header(path, n, names, tensors, n_meta, meta_keys, meta_values, &root);
  if (st) return st;
  char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!text) return header_oom(path);

  eng_atomic_file_t af;
  st = eng_atomic_open("save", path, &af);
  if (!st) {
    write_header(&af, text);
    for (int k = 0; k < n && !st; k++) st = write_tensor(&af, tensors[k]);
    if (st) {
      eng_error_prefix("save");
      eng_atomic_abort(&af);
    } else {
      st = eng_atomic_commit("save", &af);
    }
  }
  free(text);
  return st;
}

void eng_safetensors_free(eng_safetensors_t *st) {
  if (!st) return;
  for (int k = 0; k < st->n; k++) {
    if (st->names) free(st->names[k]);
    if (st->tensors) eng_tensor_release(st->tensors[k]);
  }
  for (int k = 0; k < st->n_meta; k++) {
    if (st->meta_keys) free(st->meta_keys[k]);
    if (st->meta_values) free(st->meta_values[k]);
  }
  free(st->names);
  free(st->tensors);
  free(st->meta_keys);
  free(st->meta_values);
  memset(st, 0, sizeof *st);
}
