/* The CUDA adapters of the elementwise ops (unary, binary, clamp, where): describe the operands
 * to kernels/cuda/elementwise and launch on the current stream of the output's device. Inputs
 * arrive as the shape rules in ops/elementwise.c checked them (already promoted); the output is
 * contiguous (dispatch guarantees it for these ops). */
#include <cuda_runtime.h>
#include <math.h>

#include "cpu/convert.h"
#include "cuda/cuda_internal.h"
#include "cuda/elementwise.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

/* The output's iteration space for kernels/cuda/elementwise: each input's strides over the
 * output's shape (0 where broadcast), size-1 dims dropped, and each dim merged into the one
 * outside it when every input steps through both as one (the contiguous output always does).
 * Mirrors simplify() in kernels/cpu/nd_iter.c. Returns the element count (0: nothing to do). */
static int64_t ew_geom(eng_kcuda_ew_geom_t *g, const eng_tensor_t *out, eng_tensor_t *const *in,
                       int n_in) {
  const int ndim = out->ndim;
  int64_t stride[ENG_KCUDA_EW_MAX_IN][ENG_MAX_DIMS];
  for (int k = 0; k < n_in; k++) {
    const eng_tensor_t *t = in[k];
    const int lead = ndim - t->ndim; /* t's dims line up with the output's last ones */
    for (int d = 0; d < ndim; d++)
      stride[k][d] = d < lead || t->shape[d - lead] == 1 ? 0 : t->stride[d - lead];
  }
  g->n = eng_tensor_numel(out);
  int m = 0;
  for (int d = 0; d < ndim; d++) {
    const int64_t size = out->shape[d];
    if (size == 1) continue;
    int merge = m > 0;
    for (int k = 0; k < n_in && merge; k++) merge = stride[k][m - 1] == stride[k][d] * size;
    if (merge) {
      g->shape[m - 1] *= size;
      for (int k = 0; k < n_in; k++) stride[k][m - 1] = stride[k][d];
    } else {
      g->shape[m] = size;
      for (int k = 0; k < n_in; k++) stride[k][m] = stride[k][d];
      m++;
    }
  }
  if (m == 0) {
    g->shape[0] = 1;
    for (int k = 0; k < n_in; k++) stride[k][0] = 0;
    m = 1;
  }
  g->ndim = m;
  for (int k = 0; k < ENG_KCUDA_EW_MAX_IN; k++)
    for (int d = 0; d < m; d++) g->stride[k][d] = k < n_in ? stride[k][d] : 0;
  return g->n;
}

/* The current stream of the output's device (dispatch has made that device current). */
static eng_status_t ew_stream(const eng_op_call_t *call, cudaStream_t *s) {
  return eng_cuda_stream_of(call->out[0]->storage->device.index, s);
}

static eng_status_t ew_result(const eng_op_call_t *call, int rc) {
  if (rc == 0) return ENG_OK;
  cudaGetLastError(); /* so that the next launch does not report this error again */
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", eng_call_name(call),
                   cudaGetErrorString((cudaError_t)rc));
}

eng_status_t eng_cuda_unary(const eng_op_call_t *call) {
  eng_tensor_t *y = call->out[0], *x = call->in[0];
  eng_kcuda_ew_geom_t g;
  cudaStream_t s;
  if (!ew_geom(&g, y, call->in, 1)) return ENG_OK;
  eng_status_t st = ew_stream(call, &s);
  if (st) return st;
  return ew_result(call, eng_kcuda_unary((eng_unary_op_t)(call->id - ENG_OP_NEG), x->dtype,
                                         eng_tensor_data(y), eng_tensor_data(x), &g, s));
}

/* An integer pow meeting a negative exponent is an error, as on the CPU: the kernel raises a
 * device flag that is read back, which waits for the stream. Not while a graph is being captured
 * (nothing may synchronise then): such elements are just 0, as the CPU leaves them. */
static eng_status_t binary_checked_pow(const eng_op_call_t *call, const eng_kcuda_ew_geom_t *g,
                                       cudaStream_t s) {
  const int dev = call->out[0]->storage->device.index;
  const eng_tensor_t *a = call->in[0], *b = call->in[1];
  void *out = eng_tensor_data(call->out[0]), *pa = eng_tensor_data(a), *pb = eng_tensor_data(b);
  if (eng_cuda_is_capturing(dev))
    return ew_result(call, eng_kcuda_binary(ENG_BINARY_POW, a->dtype, out, pa, pb, g, NULL, s));
  int *flag = NULL, bad = 0;
  eng_status_t st = eng_cuda_malloc(dev, sizeof(int), (eng_stream_t)s, (void **)&flag);
  if (st) return st;
  int rc = (int)cudaMemsetAsync(flag, 0, sizeof(int), s);
  if (!rc) rc = eng_kcuda_binary(ENG_BINARY_POW, a->dtype, out, pa, pb, g, flag, s);
  st = ew_result(call, rc);
  if (!st) st = eng_cuda_copy_d2h(dev, &bad, flag, sizeof bad, (eng_stream_t)s);
  eng_cuda_free(dev, flag);
  if (!st && bad)
    st = eng_error(ENG_ERR_ARG,
                   "pow: negative exponent with %s inputs (convert to a floating dtype)",
                   eng_dtype_name(a->dtype));
  return st;
}

eng_status_t eng_cuda_binary(const eng_op_call_t *call) {
  eng_tensor_t *out = call->out[0], *a = call->in[0], *b = call->in[1];
  const eng_binary_op_t op = (eng_binary_op_t)(call->id - ENG_OP_ADD);
  eng_kcuda_ew_geom_t g;
  cudaStream_t s;
  if (!ew_geom(&g, out, call->in, 2)) return ENG_OK;
  eng_status_t st = ew_stream(call, &s);
  if (st) return st;
  if (op == ENG_BINARY_POW && (a->dtype == ENG_I32 || a->dtype == ENG_I64))
    return binary_checked_pow(call, &g, s);
  return ew_result(call, eng_kcuda_binary(op, a->dtype, eng_tensor_data(out), eng_tensor_data(a),
                                          eng_tensor_data(b), &g, NULL, s));
}

/* An integer bound (already ceil'd or floor'd) saturated to [min, max], as the CPU kernel does. */
static int64_t int_bound(double v, int64_t min, int64_t max) {
  int64_t b = eng_k_sat_i64(v);
  return b < min ? min : b > max ? max : b;
}

eng_status_t eng_cuda_clamp(const eng_op_call_t *call) {
  eng_tensor_t *y = call->out[0], *x = call->in[0];
  const eng_op_attrs_t *at = &call->attrs;
  const int has_lo = !!(at->flags & ENG_ATTR_HAS_LO), has_hi = !!(at->flags & ENG_ATTR_HAS_HI);
  const eng_dtype_t dt = x->dtype;
  const int64_t tmin = dt == ENG_I32 ? INT32_MIN : dt == ENG_U8 ? 0 : INT64_MIN;
  const int64_t tmax = dt == ENG_I32 ? INT32_MAX : dt == ENG_U8 ? 255 : INT64_MAX;
  const double lo = has_lo ? at->f[0] : -INFINITY, hi = has_hi ? at->f[1] : INFINITY;
  const int64_t ilo = has_lo ? int_bound(ceil(at->f[0]), tmin, tmax) : tmin;
  const int64_t ihi = has_hi ? int_bound(floor(at->f[1]), tmin, tmax) : tmax;
  eng_kcuda_ew_geom_t g;
  cudaStream_t s;
  if (!ew_geom(&g, y, call->in, 1)) return ENG_OK;
  eng_status_t st = ew_stream(call, &s);
  if (st) return st;
  return ew_result(
      call, eng_kcuda_clamp(dt, lo, hi, ilo, ihi, eng_tensor_data(y), eng_tensor_data(x), &g, s));
}

eng_status_t eng_cuda_where(const eng_op_call_t *call) {
  eng_tensor_t *out = call->out[0], *cond = call->in[0], *a = call->in[1], *b = call->in[2];
  eng_kcuda_ew_geom_t g;
  cudaStream_t s;
  if (!ew_geom(&g, out, call->in, 3)) return ENG_OK;
  eng_status_t st = ew_stream(call, &s);
  if (st) return st;
  return ew_result(call, eng_kcuda_where(cond->dtype, eng_dtype_size(out->dtype),
                                         eng_tensor_data(out), eng_tensor_data(cond),
                                         eng_tensor_data(a), eng_tensor_data(b), &g, s));
}
