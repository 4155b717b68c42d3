/* Tensors: lifetime, queries, and fresh or wrapped allocation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor_internal.h"
#include "eng_autograd.h"

eng_status_t eng_shape_check(const char *op, const int64_t *shape, int ndim) {
  char sb[ENG_SHAPE_BUF];
  if (ndim < 0 || ndim > ENG_MAX_DIMS)
    return eng_error(ENG_ERR_SHAPE, "%s: %d dims requested; at most %d are supported", op, ndim,
                     ENG_MAX_DIMS);
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0)
      return eng_error(ENG_ERR_SHAPE, "%s: negative size in shape %s", op,
                       eng_shape_str(shape, ndim, sb, sizeof sb));
    if (shape[d] > 0 && n > INT64_MAX / shape[d])
      return eng_error(ENG_ERR_SHAPE, "%s: shape %s has too many elements", op,
                       eng_shape_str(shape, ndim, sb, sizeof sb));
    n *= shape[d];
  }
  return ENG_OK;
}

void eng_contiguous_strides(const int64_t *shape, int ndim, int64_t *stride) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    stride[d] = s;
    s *= shape[d] > 1 ? shape[d] : 1;
  }
}

static eng_tensor_t *header_new(eng_storage_t *s, eng_dtype_t dt, int ndim, const int64_t *shape,
                                const int64_t *stride, int64_t offset) {
  eng_tensor_t *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->refcount = 1;
  t->dtype = dt;
  t->ndim = ndim;
  for (int d = 0; d < ndim; d++) {
    t->shape[d] = shape[d];
    t->stride[d] = stride[d];
  }
  t->offset = offset;
  t->storage = s;
  return t;
}

eng_status_t eng_tensor_alias(const eng_tensor_t *base, int ndim, const int64_t *shape,
                              const int64_t *stride, int64_t offset, eng_tensor_t **out) {
  eng_tensor_t *t = header_new(base->storage, base->dtype, ndim, shape, stride, offset);
  if (!t) return eng_error(ENG_ERR_OOM, "view: out of memory for a tensor header");
  eng_storage_retain(base->storage);
  *out = t;
  return ENG_OK;
}

static eng_status_t check_dtype(const char *op, eng_dtype_t dt) {
  if ((int)dt < 0 || dt >= ENG_DTYPE_COUNT) return eng_error(ENG_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dt);
  return ENG_OK;
}

eng_status_t eng_tensor_empty_for(const char *op, const int64_t *shape, int ndim, eng_dtype_t dt,
                                  eng_device_t dev, eng_tensor_t **out) {
  eng_status_t st = eng_shape_check(op, shape, ndim);
  if (!st) st = check_dtype(op, dt);
  if (st) return st;
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  size_t esz = eng_dtype_size(dt);
  if ((uint64_t)n > SIZE_MAX / esz)
    return eng_error(ENG_ERR_OOM, "%s: %lld elements of %s do not fit in memory", op, (long long)n,
                     eng_dtype_name(dt));
  eng_storage_t *s;
  st = eng_storage_new((size_t)n * esz, dev, &s);
  if (st) return st;
  int64_t stride[ENG_MAX_DIMS];
  eng_contiguous_strides(shape, ndim, stride);
  eng_tensor_t *t = header_new(s, dt, ndim, shape, stride, 0);
  if (!t) {
    eng_storage_release(s);
    return eng_error(ENG_ERR_OOM, "%s: out of memory for a tensor header", op);
  }
  *out = t;
  return ENG_OK;
}

eng_status_t eng_tensor_empty(const int64_t *shape, int ndim, eng_dtype_t dt, eng_device_t dev,
                              eng_tensor_t **out) {
  return eng_tensor_empty_for("empty", shape, ndim, dt, dev, out);
}

eng_status_t eng_tensor_wrap(void *data, eng_dtype_t dt, const int64_t *shape, int ndim,
                             const int64_t *strides, eng_device_t dev, eng_tensor_t **out) {
  char sb[ENG_SHAPE_BUF];
  eng_status_t st = eng_shape_check("wrap", shape, ndim);
  if (!st) st = check_dtype("wrap", dt);
  if (st) return st;
  int64_t stride[ENG_MAX_DIMS];
  if (strides) {
    for (int d = 0; d < ndim; d++)
      if (strides[d] < 0)
        return eng_error(ENG_ERR_LAYOUT, "wrap: negative stride in %s (strides must be >= 0)",
                         eng_shape_str(strides, ndim, sb, sizeof sb));
    memcpy(stride, strides, sizeof(int64_t) * (size_t)ndim);
  } else {
    eng_contiguous_strides(shape, ndim, stride);
  }
  /* The extent is the last element's offset + 1 (0 for an empty tensor). */
  int64_t numel = 1, last = 0;
  for (int d = 0; d < ndim; d++) {
    numel *= shape[d];
    if (shape[d] > 0) last += (shape[d] - 1) * stride[d];
  }
  if (numel > 0 && !data) return eng_error(ENG_ERR_ARG, "wrap: NULL data for a %s tensor",
                                           eng_shape_str(shape, ndim, sb, sizeof sb));
  size_t nbytes = numel > 0 ? (size_t)(last + 1) * eng_dtype_size(dt) : 0;
  eng_storage_t *s = eng_storage_wrap(data, nbytes, dev);
  eng_tensor_t *t = s ? header_new(s, dt, ndim, shape, stride, 0) : NULL;
  if (!t) {
    eng_storage_release(s);
    return eng_error(ENG_ERR_OOM, "wrap: out of memory for a tensor header");
  }
  *out = t;
  return ENG_OK;
}

void eng_tensor_retain(eng_tensor_t *t) { __atomic_fetch_add(&t->refcount, 1, __ATOMIC_RELAXED); }

void eng_tensor_release(eng_tensor_t *t) {
  if (!t || __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  eng_autograd_release(t);
  eng_storage_release(t->storage);
  free(t);
}

int64_t eng_tensor_numel(const eng_tensor_t *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

size_t eng_tensor_nbytes(const eng_tensor_t *t) {
  return (size_t)eng_tensor_numel(t) * eng_dtype_size(t->dtype);
}

int eng_tensor_is_contiguous(const eng_tensor_t *t) {
  int64_t expect = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] == 0) return 1;
    if (t->shape[d] == 1) continue; /* the stride of a size-1 dim is never used */
    if (t->stride[d] != expect) return 0;
    expect *= t->shape[d];
  }
  return 1;
}

void *eng_tensor_data(const eng_tensor_t *t) {
  char *base = t->storage->data;
  if (t->offset == 0) return base; /* also for an empty wrapped tensor whose data is NULL */
  return base + t->offset * (int64_t)eng_dtype_size(t->dtype);
}

eng_device_t eng_tensor_device(const eng_tensor_t *t) { return t->storage->device; }

const char *eng_shape_str(const int64_t *shape, int ndim, char *buf, size_t n) {
  size_t used = 0;
  if (n == 0) return buf;
  buf[0] = 0;
  used += (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < ndim && used < n; d++)
    used += (size_t)snprintf(buf + used, n - used, d ? ",%lld" : "%lld", (long long)shape[d]);
  if (used < n) snprintf(buf + used, n - used, "]");
  return buf;
}

eng_status_t eng_dim_wrap(const char *op, int64_t dim, int ndim, int *out) {
  if (dim < -(int64_t)ndim || dim >= ndim) {
    if (ndim == 0)
      return eng_error(ENG_ERR_INDEX, "%s: dim %lld out of range for a 0-d tensor", op, (long long)dim);
    return eng_error(ENG_ERR_INDEX, "%s: dim %lld out of range for a %d-d tensor (expected %d..%d)", op,
                     (long long)dim, ndim, -ndim, ndim - 1);
  }
  *out = (int)(dim < 0 ? dim + ndim : dim);
  return ENG_OK;
}

int eng_shape_equal(const eng_tensor_t *a, const eng_tensor_t *b) {
  if (a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}
