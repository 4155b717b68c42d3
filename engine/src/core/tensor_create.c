/* Creation of filled and evenly spaced tensors, through the registry's fill and creation ops. */
#include <math.h>

#include "core/tensor_internal.h"
#include "eng_registry.h"
#include "ops/ops_internal.h"

static eng_status_t filled(const char *op, const int64_t *shape, int ndim, double value,
                           eng_dtype_t dt, eng_device_t dev, eng_tensor_t **out) {
  eng_tensor_t *t;
  eng_status_t st = eng_tensor_empty_for(op, shape, ndim, dt, dev, &t);
  if (st) return st;
  eng_op_call_t call = {.id = ENG_OP_FILL, .n_out = 1, .out = {t}};
  call.attrs.f[0] = value;
  st = eng_op_dispatch(&call);
  if (st) {
    eng_tensor_release(t);
    return st;
  }
  *out = t;
  return ENG_OK;
}

eng_status_t eng_tensor_full(const int64_t *shape, int ndim, double value, eng_dtype_t dt,
                             eng_device_t dev, eng_tensor_t **out) {
  return filled("full", shape, ndim, value, dt, dev, out);
}

eng_status_t eng_tensor_zeros(const int64_t *shape, int ndim, eng_dtype_t dt, eng_device_t dev,
                              eng_tensor_t **out) {
  return filled("zeros", shape, ndim, 0.0, dt, dev, out);
}

eng_status_t eng_tensor_ones(const int64_t *shape, int ndim, eng_dtype_t dt, eng_device_t dev,
                             eng_tensor_t **out) {
  return filled("ones", shape, ndim, 1.0, dt, dev, out);
}

/* Runs the ARANGE op for n values. */
static eng_status_t run_arange(int64_t n, double start, double step, double end, int flags,
                               eng_dtype_t dt, eng_device_t dev, eng_tensor_t **out) {
  eng_op_call_t call = {.id = ENG_OP_ARANGE, .n_out = 1};
  call.attrs.i[0] = n;
  call.attrs.ni = 1;
  call.attrs.f[0] = start;
  call.attrs.f[1] = step;
  call.attrs.f[2] = end;
  call.attrs.flags = flags;
  call.attrs.dtype = dt;
  call.attrs.device = dev;
  eng_status_t st = eng_op_dispatch(&call);
  if (!st) *out = call.out[0];
  return st;
}

/* Beyond 2^53 elements, start + i*step can no longer tell neighbours apart. */
#define MAX_SPACED 9007199254740992.0

eng_status_t eng_tensor_arange(double start, double end, double step, eng_dtype_t dt,
                               eng_device_t dev, eng_tensor_t **out) {
  if (!isfinite(start) || !isfinite(end) || !isfinite(step))
    return eng_error(ENG_ERR_ARG, "arange: start, end and step must be finite (got %g, %g, %g)",
                     start, end, step);
  if (step == 0) return eng_error(ENG_ERR_ARG, "arange: step must be nonzero");
  double count = ceil((end - start) / step);
  if (count < 0)
    return eng_error(ENG_ERR_ARG, "arange: step %g moves away from end %g (start %g)", step, end,
                     start);
  if (!(count <= MAX_SPACED))
    return eng_error(ENG_ERR_ARG, "arange: %g elements are too many", count);
  return run_arange((int64_t)count, start, step, end, 0, dt, dev, out);
}

eng_status_t eng_tensor_linspace(double start, double end, int64_t steps, eng_dtype_t dt,
                                 eng_device_t dev, eng_tensor_t **out) {
  if (!isfinite(start) || !isfinite(end))
    return eng_error(ENG_ERR_ARG, "linspace: start and end must be finite (got %g, %g)", start, end);
  if (steps < 0)
    return eng_error(ENG_ERR_ARG, "linspace: steps must be >= 0, got %lld", (long long)steps);
  double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0.0;
  return run_arange(steps, start, step, end, ENG_ATTR_LINSPACE, dt, dev, out);
}

eng_status_t eng_tensor_eye(int64_t n, int64_t m, eng_dtype_t dt, eng_device_t dev,
                            eng_tensor_t **out) {
  eng_op_call_t call = {.id = ENG_OP_EYE, .n_out = 1};
  call.attrs.i[0] = n;
  call.attrs.i[1] = m;
  call.attrs.ni = 2;
  call.attrs.dtype = dt;
  call.attrs.device = dev;
  eng_status_t st = eng_op_dispatch(&call);
  if (!st) *out = call.out[0];
  return st;
}

eng_status_t eng_tensor_from_f64(const double *values, const int64_t *shape, int ndim,
                                 eng_dtype_t dt, eng_device_t dev, eng_tensor_t **out) {
  eng_tensor_t *src, *t;
  eng_status_t st = eng_tensor_empty_for("from_f64", shape, ndim, dt, dev, &t);
  if (st) return st;
  /* The caller's doubles, seen as an f64 tensor (only read). */
  st = eng_tensor_wrap((double *)values, ENG_F64, shape, ndim, NULL, ENG_CPU_DEVICE, &src);
  if (!st) {
    st = eng_tensor_copy_(t, src);
    eng_tensor_release(src);
  }
  if (st) {
    eng_tensor_release(t);
    return st;
  }
  t->storage->version = 0; /* a fresh tensor: filling it was not a write to anyone's data */
  *out = t;
  return ENG_OK;
}
