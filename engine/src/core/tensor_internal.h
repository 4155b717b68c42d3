/* Helpers shared by the tensor core files (tensor.c, view.c, creation.c, rng.c). */
#ifndef ENG_TENSOR_INTERNAL_H
#define ENG_TENSOR_INTERNAL_H

#include "eng_tensor.h"

/* Room for any shape string: 8 dims of up to 20 digits, commas, brackets. */
#define ENG_SHAPE_BUF 192

/* Checks a requested shape: at most ENG_MAX_DIMS dims, no negative size, numel that fits. */
eng_status_t eng_shape_check(const char *op, const int64_t *shape, int ndim);
/* Row-major strides of a contiguous tensor of `shape`. */
void eng_contiguous_strides(const int64_t *shape, int ndim, int64_t *stride);
/* A new tensor header over base's storage and dtype (one more storage reference). */
eng_status_t eng_tensor_alias(const eng_tensor_t *base, int ndim, const int64_t *shape,
                              const int64_t *stride, int64_t offset, eng_tensor_t **out);
/* eng_tensor_empty with errors that name `op`. */
eng_status_t eng_tensor_empty_for(const char *op, const int64_t *shape, int ndim, eng_dtype_t dt,
                                  eng_device_t dev, eng_tensor_t **out);

#endif
