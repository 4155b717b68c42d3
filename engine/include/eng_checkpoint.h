/* Checkpoints in the safetensors format: 8-byte little-endian header length, a JSON header
 * {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}},
 * then the raw little-endian data. Writes are atomic (temporary file in the same folder, fsync,
 * rename). Reads validate everything before trusting it. */
#ifndef ENG_CHECKPOINT_H
#define ENG_CHECKPOINT_H

#include "eng_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int n;
  char **names;
  eng_tensor_t **tensors; /* CPU, contiguous, owned */
  int n_meta;
  char **meta_keys;
  char **meta_values;
} eng_safetensors_t;

/* Tensors may live on any device and be non-contiguous; they are written as contiguous data.
 * Names must be unique and non-empty; "__metadata__" is reserved. */
eng_status_t eng_safetensors_save(const char *path, int n, const char *const *names,
                                  eng_tensor_t *const *tensors, int n_meta,
                                  const char *const *meta_keys, const char *const *meta_values);
eng_status_t eng_safetensors_load(const char *path, eng_safetensors_t *out);
void eng_safetensors_free(eng_safetensors_t *st);

#ifdef __cplusplus
}
#endif
#endif
