/* embedding, index_select and gather: shape rules, CPU adapters and the typed functions. All three
 * are one gather kernel (eng_kcpu_take) with different strides; indices are converted to a
 * contiguous i64 tensor and bounds-checked before any data moves. */
#include <string.h>

#include "cpu/index.h"
#include "eng_ops.h"
#include "ops/op_common.h"
#include "ops/ops_internal.h"

static int is_index_dtype(eng_dtype_t dt) { return dt == ENG_I32 || dt == ENG_I64 || dt == ENG_U8; }

static eng_status_t check_index_dtype(const char *op, const char *what, const eng_tensor_t *idx) {
  if (is_index_dtype(idx->dtype)) return ENG_OK;
  return eng_error(ENG_ERR_DTYPE, "%s: %s must be an integer tensor (i32, i64 or u8), got %s", op,
                   what, eng_dtype_name(idx->dtype));
}

/* The index as a contiguous i64 tensor. */
static eng_status_t index_i64(eng_tensor_t *idx, eng_tensor_t **out) {
  eng_tensor_t *t = NULL;
  eng_status_t st = eng_tensor_to_dtype(idx, ENG_I64, &t);
  if (st) return st;
  st = eng_tensor_contiguous(t, out);
  eng_tensor_release(t);
  return st;
}

/* Checks every index against [0, limit); on failure stores the offending value in *bad and
 * returns 0. */
static int in_range(const eng_tensor_t *idx64, int64_t limit, int64_t *bad) {
  const int64_t *v = eng_tensor_data(idx64);
  int64_t at = eng_kcpu_first_out_of_range(v, eng_tensor_numel(idx64), limit);
  if (at < 0) return 1;
  *bad = v[at];
  return 0;
}

static void set_meta(eng_op_call_t *call, const int64_t *shape, int ndim, eng_dtype_t dt) {
  eng_op_meta_t *m = &call->meta[0];
  m->ndim = ndim;
  memcpy(m->shape, shape, sizeof(int64_t) * (size_t)ndim);
  m->dtype = dt;
  call->n_out = 1;
}

/* ---- embedding: in[0] ids, in[1] weight ---- */

eng_status_t eng_infer_embedding(eng_op_call_t *call) {
  const eng_tensor_t *ids = call->in[0], *w = call->in[1];
  char si[ENG_OP_SHAPE_BUF], sw[ENG_OP_SHAPE_BUF];
  eng_status_t st = check_index_dtype("embedding", "ids", ids);
  if (st) return st;
  if (w->ndim == 0)
    return eng_error(ENG_ERR_SHAPE, "embedding: weight needs at least 1 dim, got %s",
                     ENG_SHAPE_STR(w, sw));
  int nd = ids->ndim + w->ndim - 1;
  if (nd > ENG_MAX_DIMS)
    return eng_error(ENG_ERR_SHAPE,
                     "embedding: result would have %d dims (max %d): ids %s, weight %s", nd,
                     ENG_MAX_DIMS, ENG_SHAPE_STR(ids, si), ENG_SHAPE_STR(w, sw));
  int64_t shape[2 * ENG_MAX_DIMS];
  memcpy(shape, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
  memcpy(shape + ids->ndim, w->shape + 1, sizeof(int64_t) * (size_t)(w->ndim - 1));
  set_meta(call, shape, nd, w->dtype);
  return ENG_OK;
}

eng_status_t eng_cpu_embedding(const eng_op_call_t *call) {
  eng_tensor_t *w = call->in[1], *out = call->out[0], *ids = NULL;
  eng_status_t st = index_i64(call->in[0], &ids);
  if (st) return st;
  int64_t bad;
  if (!in_range(ids, w->shape[0], &bad)) {
    eng_tensor_release(ids);
    return eng_error(ENG_ERR_INDEX, "embedding: id %lld out of range for %lld rows", (long long)bad,
                     (long long)w->shape[0]);
  }
  /* out dims: the ids' dims (which pick rows) then the weight's row dims */
  int p = ids->ndim, q = w->ndim - 1;
  int64_t x_stride[ENG_MAX_DIMS] = {0}, idx_stride[ENG_MAX_DIMS] = {0};
  memcpy(idx_stride, ids->stride, sizeof(int64_t) * (size_t)p);
  memcpy(x_stride + p, w->stride + 1, sizeof(int64_t) * (size_t)q);
  eng_kcpu_take(eng_tensor_data(out), eng_tensor_data(w), eng_dtype_size(w->dtype), out->ndim,
                out->shape, x_stride, eng_tensor_data(ids), idx_stride, w->stride[0]);
  eng_tensor_release(ids);
  return ENG_OK;
}

eng_status_t eng_op_embedding(eng_tensor_t *ids, eng_tensor_t *weight, eng_tensor_t **out) {
  *out = NULL;
  if (!ids || !weight) return eng_error(ENG_ERR_ARG, "embedding: missing argument");
  eng_tensor_t *in[2] = {ids, weight};
  eng_op_call_t call = {.id = ENG_OP_EMBEDDING, .n_in = 2, .in = in, .n_out = 1};
  return eng_call_run(&call, out);
}

/* ---- index_select and gather: in[0] x, in[1] index, attrs.i[0] dim (normalised) ---- */

static eng_status_t check_dim(const char *op, const eng_tensor_t *x, int64_t dim) {
  char sx[ENG_OP_SHAPE_BUF];
  if (dim < 0 || dim >= x->ndim)
    return eng_error(ENG_ERR_INDEX, "%s: dim %lld out of range for input %s", op, (long long)dim,
                     ENG_SHAPE_STR(x, sx));
  return ENG_OK;
}

eng_status_t eng_infer_index_select(eng_op_call_t *call) {
  const eng_tensor_t *x = call->in[0], *idx = call->in[1];
  int64_t dim = call->attrs.i[0];
  char si[ENG_OP_SHAPE_BUF];
  eng_status_t st = check_dim("index_select", x, dim);
  if (!st) st = check_index_dtype("index_select", "index", idx);
  if (st) return st;
  if (idx->ndim != 1)
    return eng_error(ENG_ERR_SHAPE, "index_select: index must be 1-D, got %s",
                     ENG_SHAPE_STR(idx, si));
  int64_t shape[ENG_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  shape[dim] = idx->shape[0];
  set_meta(call, shape, x->ndim, x->dtype);
  return ENG_OK;
}

/* Shared by index_select and gather: bounds-check, then take along dim with the given index
 * strides (per output dim). */
static eng_status_t take_along(const char *op, const eng_op_call_t *call, eng_tensor_t *idx,
                               const int64_t *idx_stride) {
  const eng_tensor_t *x = call->in[0];
  eng_tensor_t *out = call->out[0];
  int dim = (int)call->attrs.i[0];
  int64_t bad;
  if (!in_range(idx, x->shape[dim], &bad))
    return eng_error(ENG_ERR_INDEX, "%s: index %lld out of range for dim %d of size %lld", op,
                     (long long)bad, dim, (long long)x->shape[dim]);
  int64_t x_stride[ENG_MAX_DIMS];
  memcpy(x_stride, x->stride, sizeof(int64_t) * (size_t)x->ndim);
  x_stride[dim] = 0; /* along dim the index picks the element */
  eng_kcpu_take(eng_tensor_data(out), eng_tensor_data(x), eng_dtype_size(x->dtype), out->ndim,
                out->shape, x_stride, eng_tensor_data(idx), idx_stride, x->stride[dim]);
  return ENG_OK;
}

eng_status_t eng_cpu_index_select(const eng_op_call_t *call) {
  eng_tensor_t *idx = NULL;
  eng_status_t st = index_i64(call->in[1], &idx);
  if (st) return st;
  int64_t idx_stride[ENG_MAX_DIMS] = {0};
  idx_stride[call->attrs.i[0]] = idx->stride[0];
  st = take_along("index_select", call, idx, idx_stride);
  eng_tensor_release(idx);
  return st;
}

eng_status_t eng_infer_gather(eng_op_call_t *call) {
  const eng_tensor_t *x = call->in[0], *idx = call->in[1];
  int64_t dim = call->attrs.i[0];
  char sx[ENG_OP_SHAPE_BUF], si[ENG_OP_SHAPE_BUF];
  eng_status_t st = check_dim("gather", x, dim);
  if (!st) st = check_index_dtype("gather", "index", idx);
  if (st) return st;
  if (idx->ndim != x->ndim)
    return eng_error(ENG_ERR_SHAPE, "gather: index %s and input %s need the same number of dims",
                     ENG_SHAPE_STR(idx, si), ENG_SHAPE_STR(x, sx));
  for (int d = 0; d < x->ndim; d++)
    if (d != dim && idx->shape[d] > x->shape[d])
      return eng_error(ENG_ERR_SHAPE, "gather: index %s is larger than input %s at dim %d",
                       ENG_SHAPE_STR(idx, si), ENG_SHAPE_STR(x, sx), d);
  set_meta(call, idx->shape, idx->ndim, x->dtype);
  return ENG_OK;
}

eng_status_t eng_cpu_gather(const eng_op_call_t *call) {
  eng_tensor_t *idx = NULL;
  eng_status_t st = index_i64(call->in[1], &idx);
  if (st) return st;
  st = take_along("gather", call, idx, idx->stride);
  eng_tensor_release(idx);
  return st;
}

static eng_status_t dispatch_along(eng_op_id_t id, const char *op, eng_tensor_t *x, int64_t dim,
                                   eng_tensor_t *index, eng_tensor_t **out) {
  *out = NULL;
  if (!x || !index) return eng_error(ENG_ERR_ARG, "%s: missing argument", op);
  int d;
  eng_status_t st = eng_dim_wrap(op, dim, x->ndim, &d);
  if (st) return st;
  eng_tensor_t *in[2] = {x, index};
  eng_op_call_t call = {.id = id, .n_in = 2, .in = in, .n_out = 1};
  call.attrs.i[0] = d;
  call.attrs.ni = 1;
  return eng_call_run(&call, out);
}

eng_status_t eng_op_index_select(eng_tensor_t *x, int64_t dim, eng_tensor_t *index,
                                 eng_tensor_t **out) {
  return dispatch_along(ENG_OP_INDEX_SELECT, "index_select", x, dim, index, out);
}

eng_status_t eng_op_gather(eng_tensor_t *x, int64_t dim, eng_tensor_t *index, eng_tensor_t **out) {
  return dispatch_along(ENG_OP_GATHER, "gather", x, dim, index, out);
}
