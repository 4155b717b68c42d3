/* The copy and fill ops: shape rules and CPU adapters. */
#include <string.h>

#include "core/tensor_internal.h"
#include "cpu/copy.h"
#include "cpu/fill.h"
#include "ops/ops_internal.h"

eng_status_t eng_infer_copy(eng_op_call_t *call) {
  char a[ENG_SHAPE_BUF], b[ENG_SHAPE_BUF];
  const eng_tensor_t *src = call->in[0], *dst = call->out[0];
  eng_op_meta_t *m = &call->meta[0];
  call->n_out = 1;
  if (!src) return eng_error(ENG_ERR_ARG, "copy: no source tensor");
  if (!dst) { /* a fresh destination: src's shape, the asked dtype */
    if ((int)call->attrs.dtype < 0 || call->attrs.dtype >= ENG_DTYPE_COUNT)
      return eng_error(ENG_ERR_DTYPE, "copy: invalid dtype %d", (int)call->attrs.dtype);
    m->ndim = src->ndim;
    memcpy(m->shape, src->shape, sizeof m->shape);
    m->dtype = call->attrs.dtype;
    return ENG_OK;
  }
  int lead = dst->ndim - src->ndim;
  for (int d = 0; d < src->ndim && lead >= 0; d++)
    if (src->shape[d] != 1 && src->shape[d] != dst->shape[lead + d]) lead = -1;
  if (lead < 0)
    return eng_error(ENG_ERR_SHAPE,
                     "copy: a %s source does not fit a %s destination (shapes must "
                     "match or broadcast)",
                     ENG_SHAPE_STR(src, a), ENG_SHAPE_STR(dst, b));
  for (int d = 0; d < dst->ndim; d++)
    if (dst->shape[d] > 1 && dst->stride[d] == 0)
      return eng_error(ENG_ERR_LAYOUT,
                       "copy: the %s destination has elements sharing memory "
                       "(strides %s, an expanded view); copy into a contiguous tensor instead",
                       ENG_SHAPE_STR(dst, a), eng_shape_str(dst->stride, dst->ndim, b, sizeof b));
  m->ndim = dst->ndim;
  memcpy(m->shape, dst->shape, sizeof m->shape);
  m->dtype = dst->dtype;
  return ENG_OK;
}

/* src's strides seen from dst's dims: missing leading dims and size-1 dims broadcast (stride 0). */
static void broadcast_strides(const eng_tensor_t *src, const eng_tensor_t *dst, int64_t *stride) {
  int lead = dst->ndim - src->ndim;
  for (int d = 0; d < dst->ndim; d++) {
    int s = d - lead;
    stride[d] = s < 0 || src->shape[s] == 1 ? 0 : src->stride[s];
  }
}

/* The addresses [lo, hi) that t's elements occupy (t not empty). */
static void byte_span(const eng_tensor_t *t, uintptr_t *lo, uintptr_t *hi) {
  int64_t last = 0;
  for (int d = 0; d < t->ndim; d++) last += (t->shape[d] - 1) * t->stride[d];
  *lo = (uintptr_t)eng_tensor_data(t);
  *hi = *lo + (uintptr_t)(last + 1) * eng_dtype_size(t->dtype);
}

eng_status_t eng_cpu_copy(const eng_op_call_t *call) {
  const eng_tensor_t *src = call->in[0];
  eng_tensor_t *dst = call->out[0];
  if (eng_tensor_numel(dst) == 0) return ENG_OK;
  int64_t sstride[ENG_MAX_DIMS];
  broadcast_strides(src, dst, sstride);
  uintptr_t slo, shi, dlo, dhi;
  byte_span(src, &slo, &shi);
  byte_span(dst, &dlo, &dhi);
  if (slo < dhi && dlo < shi) { /* the source overlaps the destination */
    if (slo == dlo && src->dtype == dst->dtype &&
        !memcmp(sstride, dst->stride, sizeof(int64_t) * (size_t)dst->ndim))
      return ENG_OK; /* copying a tensor onto itself */
    /* Read everything before writing anything: go through a contiguous temporary. */
    eng_tensor_t *tmp;
    eng_status_t st =
        eng_tensor_empty_for("copy", src->shape, src->ndim, src->dtype, ENG_CPU_DEVICE, &tmp);
    if (st) return st;
    eng_kcpu_copy(eng_tensor_data(tmp), tmp->dtype, tmp->stride, eng_tensor_data(src), src->dtype,
                  src->stride, src->shape, src->ndim);
    broadcast_strides(tmp, dst, sstride);
    eng_kcpu_copy(eng_tensor_data(dst), dst->dtype, dst->stride, eng_tensor_data(tmp), tmp->dtype,
                  sstride, dst->shape, dst->ndim);
    eng_tensor_release(tmp);
    return ENG_OK;
  }
  eng_kcpu_copy(eng_tensor_data(dst), dst->dtype, dst->stride, eng_tensor_data(src), src->dtype,
                sstride, dst->shape, dst->ndim);
  return ENG_OK;
}

eng_status_t eng_infer_fill(eng_op_call_t *call) {
  const eng_tensor_t *dst = call->out[0];
  call->n_out = 1;
  if (!dst) return eng_error(ENG_ERR_INTERNAL, "fill: no tensor to fill");
  call->meta[0].ndim = dst->ndim;
  memcpy(call->meta[0].shape, dst->shape, sizeof call->meta[0].shape);
  call->meta[0].dtype = dst->dtype;
  return ENG_OK;
}

eng_status_t eng_cpu_fill(const eng_op_call_t *call) {
  eng_tensor_t *t = call->out[0];
  eng_kcpu_fill(eng_tensor_data(t), t->dtype, t->stride, t->shape, t->ndim, call->attrs.f[0]);
  return ENG_OK;
}
