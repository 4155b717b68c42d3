/* index_add and scatter_add (out of place): shape rules, the body both backends share, the CPU
 * adapter and the typed functions. They are the backward of index_select/embedding and of
 * gather. Inputs: in[0] base, in[1] index, in[2] src; attrs.i[0] dim (normalised). */
#include <string.h>

#include "cpu/index.h"
#include "cpu/scatter.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"
#include "ops/scatter.h"

/* The dtypes the accumulators take (float atomics on CUDA; exact integer sums). */
static int scatter_dtype(eng_dtype_t dt) { return eng_dtype_is_float(dt) || dt == ENG_I32 || dt == ENG_I64; }

/* The checks both ops make of base, index and src (except their shapes). */
static eng_status_t check_common(eng_op_call_t *call) {
  const char *op = eng_call_name(call);
  eng_status_t st = eng_call_need_inputs(call, 3);
  if (st) return st;
  const eng_tensor_t *base = call->in[0], *idx = call->in[1], *src = call->in[2];
  char sb[ENG_OP_SHAPE_BUF];
  if (!scatter_dtype(base->dtype))
    return eng_error(ENG_ERR_DTYPE, "%s: base must be f64, f32, f16, bf16, i32 or i64, got %s", op,
                     eng_dtype_name(base->dtype));
  if (src->dtype != base->dtype)
    return eng_error(ENG_ERR_DTYPE, "%s: src (%s) must have base's dtype (%s)", op,
                     eng_dtype_name(src->dtype), eng_dtype_name(base->dtype));
  if (idx->dtype != ENG_I32 && idx->dtype != ENG_I64 && idx->dtype != ENG_U8)
    return eng_error(ENG_ERR_DTYPE, "%s: index must be an integer tensor (i32, i64 or u8), got %s",
                     op, eng_dtype_name(idx->dtype));
  int64_t dim = call->attrs.i[0];
  if (dim < 0 || dim >= base->ndim)
    return eng_error(ENG_ERR_INDEX, "%s: dim %lld out of range for base %s", op, (long long)dim,
                     ENG_SHAPE_STR(base, sb));
  if (src->ndim != base->ndim)
    return eng_error(ENG_ERR_SHAPE, "%s: src has %d dims, base %d", op, src->ndim, base->ndim);
  eng_call_meta_like(call, base, base->dtype);
  return ENG_OK;
}

eng_status_t eng_infer_index_add(eng_op_call_t *call) {
  eng_status_t st = check_common(call);
  if (st) return st;
  const eng_tensor_t *base = call->in[0], *idx = call->in[1], *src = call->in[2];
  int dim = (int)call->attrs.i[0];
  char sb[ENG_OP_SHAPE_BUF], si[ENG_OP_SHAPE_BUF], ss[ENG_OP_SHAPE_BUF];
  if (idx->ndim != 1)
    return eng_error(ENG_ERR_SHAPE, "index_add: index must be 1-D, got %s", ENG_SHAPE_STR(idx, si));
  for (int d = 0; d < base->ndim; d++) {
    int64_t want = d == dim ? idx->shape[0] : base->shape[d];
    if (src->shape[d] != want)
      return eng_error(ENG_ERR_SHAPE,
                       "index_add: src %s must match base %s off dim %d and have index %s's "
                       "length along it",
                       ENG_SHAPE_STR(src, ss), ENG_SHAPE_STR(base, sb), dim, ENG_SHAPE_STR(idx, si));
  }
  return ENG_OK;
}

eng_status_t eng_infer_scatter_add(eng_op_call_t *call) {
  eng_status_t st = check_common(call);
  if (st) return st;
  const eng_tensor_t *base = call->in[0], *idx = call->in[1], *src = call->in[2];
  int dim = (int)call->attrs.i[0];
  char sb[ENG_OP_SHAPE_BUF], si[ENG_OP_SHAPE_BUF], ss[ENG_OP_SHAPE_BUF];
  if (idx->ndim != base->ndim)
    return eng_error(ENG_ERR_SHAPE, "scatter_add: index %s and base %s need the same number of dims",
                     ENG_SHAPE_STR(idx, si), ENG_SHAPE_STR(base, sb));
  for (int d = 0; d < base->ndim; d++)
    if (idx->shape[d] > src->shape[d] || (d != dim && idx->shape[d] > base->shape[d]))
      return eng_error(ENG_ERR_SHAPE,
                       "scatter_add: index %s must be no larger than src %s, and than base %s off "
                       "dim %d",
                       ENG_SHAPE_STR(idx, si), ENG_SHAPE_STR(src, ss), ENG_SHAPE_STR(base, sb), dim);
  return ENG_OK;
}

static void contiguous_strides(const int64_t *shape, int ndim, int64_t *stride) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    stride[d] = s;
    s *= shape[d];
  }
}

/* The index as a contiguous i64 tensor (on its own device). */
static eng_status_t index_i64(eng_tensor_t *idx, eng_tensor_t **out) {
  eng_tensor_t *t = NULL;
  eng_status_t st = eng_tensor_to_dtype(idx, ENG_I64, &t);
  if (st) return st;
  st = eng_tensor_contiguous(t, out);
  eng_tensor_release(t);
  return st;
}

eng_status_t eng_scatter_run(const eng_op_call_t *call, eng_scatter_backend_fn add) {
  eng_tensor_t *base = call->in[0], *src = call->in[2], *out = call->out[0];
  eng_tensor_t *idx = NULL, *acc = NULL;
  int dim = (int)call->attrs.i[0];
  int narrow = out->dtype == ENG_F16 || out->dtype == ENG_BF16;
  eng_status_t st = index_i64(call->in[1], &idx);
  if (st) return st;
  if (narrow) {
    st = eng_tensor_to_dtype(base, ENG_F32, &acc); /* a fresh contiguous f32 copy */
  } else if (!(st = eng_tensor_copy_(out, base))) {
    eng_tensor_retain(out);
    acc = out;
  }
  if (st) goto done;

  eng_scatter_args_t a = {.op = eng_call_name(call), .acc = eng_tensor_data(acc),
                          .acc_dt = acc->dtype, .src = eng_tensor_data(src), .src_dt = src->dtype,
                          .idx = idx, .ndim = base->ndim, .dim = dim, .limit = base->shape[dim]};
  contiguous_strides(base->shape, base->ndim, a.acc_stride);
  a.pick_stride = a.acc_stride[dim];
  memcpy(a.src_stride, src->stride, sizeof(int64_t) * (size_t)src->ndim);
  if (call->id == ENG_OP_INDEX_ADD) {
    /* over src's positions; the 1-D index is read along dim only */
    memcpy(a.shape, src->shape, sizeof(int64_t) * (size_t)src->ndim);
    a.idx_stride[dim] = 1;
  } else {
    /* over index's positions, each with its own index value */
    memcpy(a.shape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
    contiguous_strides(idx->shape, idx->ndim, a.idx_stride);
  }
  st = add(&a);
  if (!st && narrow) st = eng_tensor_copy_(out, acc);
done:
  eng_tensor_release(idx);
  eng_tensor_release(acc);
  return st;
}

static eng_status_t cpu_add(const eng_scatter_args_t *a) {
  const int64_t *v = eng_tensor_data(a->idx);
  int64_t at = eng_kcpu_first_out_of_range(v, eng_tensor_numel(a->idx), a->limit);
  if (at >= 0)
    return eng_error(ENG_ERR_INDEX, "%s: index %lld out of range for dim %d of size %lld", a->op,
                     (long long)v[at], a->dim, (long long)a->limit);
  int rc = eng_kcpu_scatter_add(a->acc, a->acc_dt, a->acc_stride, a->pick_stride, a->src, a->src_dt,
                                a->src_stride, v, a->idx_stride, a->ndim, a->shape, a->dim);
  if (rc == -2) return eng_error(ENG_ERR_OOM, "%s: out of memory for the offsets", a->op);
  if (rc) return eng_error(ENG_ERR_INTERNAL, "%s: no kernel for %s into %s", a->op,
                           eng_dtype_name(a->src_dt), eng_dtype_name(a->acc_dt));
  return ENG_OK;
}

eng_status_t eng_cpu_index_add(const eng_op_call_t *call) { return eng_scatter_run(call, cpu_add); }
eng_status_t eng_cpu_scatter_add(const eng_op_call_t *call) { return eng_scatter_run(call, cpu_add); }

static eng_status_t run_scatter(eng_op_id_t id, const char *op, eng_tensor_t *base, int64_t dim,
                                eng_tensor_t *index, eng_tensor_t *src, eng_tensor_t **out) {
  *out = NULL;
  if (!base || !index || !src) return eng_error(ENG_ERR_ARG, "%s: missing argument", op);
  int d;
  eng_status_t st = eng_dim_wrap(op, dim, base->ndim, &d);
  if (st) return st;
  eng_tensor_t *in[3] = {base, index, src};
  eng_op_call_t call = {.id = id, .n_in = 3, .in = in, .n_out = 1};
  call.attrs.i[0] = d;
  call.attrs.ni = 1;
  return eng_call_run(&call, out);
}

eng_status_t eng_op_index_add(eng_tensor_t *base, int64_t dim, eng_tensor_t *index,
                              eng_tensor_t *src, eng_tensor_t **out) {
  return run_scatter(ENG_OP_INDEX_ADD, "index_add", base, dim, index, src, out);
}

eng_status_t eng_op_scatter_add(eng_tensor_t *base, int64_t dim, eng_tensor_t *index,
                                eng_tensor_t *src, eng_tensor_t **out) {
  return run_scatter(ENG_OP_SCATTER_ADD, "scatter_add", base, dim, index, src, out);
}
