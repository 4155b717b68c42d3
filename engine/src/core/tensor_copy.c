/* Copies, conversions, fills and element access. Data moves through the registry's copy and fill
 * ops, so each backend only supplies kernels. */
#include <string.h>

#include "core/tensor_internal.h"
#include "eng_autograd.h"
#include "eng_registry.h"

eng_status_t eng_tensor_copy_(eng_tensor_t *dst, const eng_tensor_t *src) {
  eng_tensor_t *in[1] = {(eng_tensor_t *)src};
  eng_op_call_t call = {.id = ENG_OP_COPY, .n_in = 1, .in = in, .n_out = 1, .out = {dst}};
  eng_status_t st = eng_op_dispatch(&call);
  if (!st) eng_tensor_bump_version(dst);
  return st;
}

/* A fresh contiguous copy of t with dtype dt on dev (the copy kernel of the non-CPU side moves it). */
static eng_status_t copy_as(const eng_tensor_t *t, eng_dtype_t dt, eng_device_t dev,
                            eng_tensor_t **out) {
  eng_tensor_t *in[1] = {(eng_tensor_t *)t};
  eng_op_call_t call = {.id = ENG_OP_COPY, .n_in = 1, .in = in, .n_out = 1};
  call.attrs.dtype = dt;
  call.attrs.device = dev;
  eng_status_t st = eng_op_dispatch(&call);
  if (!st) *out = call.out[0];
  return st;
}

eng_status_t eng_tensor_clone(const eng_tensor_t *t, eng_tensor_t **out) {
  return copy_as(t, t->dtype, eng_tensor_device(t), out);
}

eng_status_t eng_tensor_contiguous(eng_tensor_t *t, eng_tensor_t **out) {
  if (!eng_tensor_is_contiguous(t)) return copy_as(t, t->dtype, eng_tensor_device(t), out);
  eng_tensor_retain(t);
  *out = t;
  return ENG_OK;
}

eng_status_t eng_tensor_to_dtype(eng_tensor_t *t, eng_dtype_t dt, eng_tensor_t **out) {
  if (t->dtype != dt) return copy_as(t, dt, eng_tensor_device(t), out);
  eng_tensor_retain(t);
  *out = t;
  return ENG_OK;
}

eng_status_t eng_tensor_to_device(eng_tensor_t *t, eng_device_t dev, eng_tensor_t **out) {
  if (eng_device_equal(eng_tensor_device(t), dev)) {
    eng_tensor_retain(t);
    *out = t;
    return ENG_OK;
  }
  return copy_as(t, t->dtype, dev, out);
}

eng_status_t eng_tensor_fill_(eng_tensor_t *t, double value) {
  eng_op_call_t call = {.id = ENG_OP_FILL, .n_out = 1, .out = {t}};
  call.attrs.f[0] = value;
  eng_status_t st = eng_op_dispatch(&call);
  if (!st) eng_tensor_bump_version(t);
  return st;
}

/* The element offset of idx, after checking it against t's shape. */
static eng_status_t element_offset(const char *op, const eng_tensor_t *t, const int64_t *idx,
                                   int64_t *off) {
  int64_t o = t->offset;
  for (int d = 0; d < t->ndim; d++) {
    if (idx[d] < 0 || idx[d] >= t->shape[d]) {
      char ib[ENG_SHAPE_BUF], sb[ENG_SHAPE_BUF];
      return eng_error(ENG_ERR_INDEX, "%s: index %s out of range for shape %s", op,
                       eng_shape_str(idx, t->ndim, ib, sizeof ib), ENG_SHAPE_STR(t, sb));
    }
    o += idx[d] * t->stride[d];
  }
  *off = o;
  return ENG_OK;
}

eng_status_t eng_tensor_get(const eng_tensor_t *t, const int64_t *idx, double *out) {
  int64_t off;
  eng_status_t st = element_offset("get", t, idx, &off);
  if (st) return st;
  if (t->storage->device.type == ENG_DEV_CPU) {
    *out = eng_load_f64(t->storage->data, t->dtype, off);
    return ENG_OK;
  }
  /* Elsewhere: bring the one element over as a 0-d tensor. */
  eng_tensor_t *elem, *host = NULL;
  st = eng_tensor_alias(t, 0, NULL, NULL, off, &elem);
  if (st) return st;
  st = eng_tensor_to_device(elem, ENG_CPU_DEVICE, &host);
  if (!st) *out = eng_load_f64(eng_tensor_data(host), host->dtype, 0);
  eng_tensor_release(host);
  eng_tensor_release(elem);
  return st;
}

eng_status_t eng_tensor_set(eng_tensor_t *t, const int64_t *idx, double value) {
  int64_t off;
  eng_status_t st = element_offset("set", t, idx, &off);
  if (st) return st;
  if (t->storage->device.type == ENG_DEV_CPU) {
    eng_store_f64(t->storage->data, t->dtype, off, value);
    eng_tensor_bump_version(t);
    return ENG_OK;
  }
  eng_tensor_t *elem, *src;
  st = eng_tensor_alias(t, 0, NULL, NULL, off, &elem);
  if (st) return st;
  st = eng_tensor_wrap(&value, ENG_F64, NULL, 0, NULL, ENG_CPU_DEVICE, &src);
  if (!st) {
    st = eng_tensor_copy_(elem, src);
    eng_tensor_release(src);
  }
  eng_tensor_release(elem);
  if (!st) eng_tensor_bump_version(t);
  return st;
}

eng_status_t eng_tensor_to_f64(const eng_tensor_t *t, double *values) {
  eng_tensor_t *dst;
  eng_status_t st = eng_tensor_wrap(values, ENG_F64, t->shape, t->ndim, NULL, ENG_CPU_DEVICE, &dst);
  if (st) return st;
  st = eng_tensor_copy_(dst, t);
  eng_tensor_release(dst);
  return st;
}
