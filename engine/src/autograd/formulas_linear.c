/* Backward formulas of linear (with its fused activations), cat, copy and the indexing ops. */
#include <math.h>

#include "autograd/autograd_internal.h"
#include "ops/ops_internal.h"

/* d act / dz for the tanh-approximated GELU:
 * 0.5 (1 + t) + 0.5 z (1 - t^2) c (1 + 3 k z^2), t = tanh(c (z + k z^3)), c = sqrt(2/pi), k = 0.044715. */
static eng_status_t gelu_tanh_slope(eng_tensor_t *z, eng_tensor_t **out) {
  const double c = sqrt(2.0 / M_PI), k = 0.044715;
  eng_tensor_t *z2, *t, *u, *v, *th, *one;
  eng_status_t st = eng_op_binary(ENG_BINARY_MUL, z, z, &z2);
  if (st) return st;
  st = eng_ag_mul_scalar(z2, k, &u);                       /* k z^2 */
  if (!st) st = eng_ag_scalar(z, 1.0, &one);
  if (!st) st = eng_op_binary(ENG_BINARY_ADD, u, one, &v), eng_tensor_release(u); /* 1 + k z^2 */
  if (!st) st = eng_op_binary(ENG_BINARY_MUL, z, v, &t), eng_tensor_release(v);  /* z + k z^3 */
  if (!st) st = eng_ag_mul_scalar(t, c, &u), eng_tensor_release(t);
  if (!st) st = eng_op_unary(ENG_UNARY_TANH, u, &th), eng_tensor_release(u);
  if (st) return eng_tensor_release(z2), st;
  /* second term: 0.5 z (1 - t^2) c (1 + 3 k z^2) */
  st = eng_ag_mul_scalar(z2, 3.0 * k, &u);
  eng_tensor_release(z2);
  if (!st) st = eng_op_binary(ENG_BINARY_ADD, u, one, &v), eng_tensor_release(u);
  if (!st) st = eng_op_binary(ENG_BINARY_MUL, th, th, &t);
  if (!st) st = eng_ag_bin(ENG_BINARY_SUB, one, t, 2, &u);  /* 1 - t^2 */
  if (!st) st = eng_ag_bin(ENG_BINARY_MUL, u, v, 3, &t);
  if (!st) st = eng_ag_bin(ENG_BINARY_MUL, t, z, 1, &u);
  if (!st) st = eng_ag_mul_scalar(u, 0.5 * c, &v), eng_tensor_release(u);
  /* first term: 0.5 (1 + t) */
  if (!st) st = eng_ag_bin(ENG_BINARY_ADD, th, one, 0, &t);
  if (!st) st = eng_ag_mul_scalar(t, 0.5, &u), eng_tensor_release(t);
  if (!st) st = eng_ag_bin(ENG_BINARY_ADD, u, v, 3, out);
  eng_tensor_release(th);
  eng_tensor_release(one);
  return st;
}

/* x with all leading dims merged: [M, last]. */
static eng_status_t rows2d(eng_tensor_t *x, eng_tensor_t **out) {
  int64_t shape[2] = {-1, x->shape[x->ndim - 1]};
  return eng_tensor_reshape(x, shape, 2, out);
}

static eng_status_t linear_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *x = eng_ag_in(n, 0), *w = eng_ag_in(n, 1), *b = eng_ag_in(n, 2), *gz, *t, *u = NULL;
  eng_status_t st = ENG_OK;
  int act = (int)n->attrs.i[0];
  if (act == ENG_ACT_NONE) {
    eng_tensor_retain(gout[0]);
    gz = gout[0];
  } else { /* the pre-activation is recomputed (one more GEMM) rather than kept */
    eng_tensor_t *z, *slope;
    st = eng_op_linear(x, w, b, ENG_ACT_NONE, &z);
    if (st) return st;
    if (act == ENG_ACT_RELU) {
      eng_tensor_t *zero, *pos;
      st = eng_ag_scalar(z, 0.0, &zero);
      if (!st) st = eng_ag_bin(ENG_BINARY_GT, z, zero, 2, &pos);
      if (!st) st = eng_ag_mask(pos, gout[0], &gz), eng_tensor_release(pos);
    } else {
      st = gelu_tanh_slope(z, &slope);
      if (!st) st = eng_ag_bin(ENG_BINARY_MUL, gout[0], slope, 2, &gz);
    }
    eng_tensor_release(z);
    if (st) return st;
  }
  if (eng_ag_needs(n, 0)) st = eng_op_matmul(gz, w, &gin[0]); /* [..., N] @ [N, K] */
  if (!st && eng_ag_needs(n, 1)) {                             /* gz^T x: [N, M] @ [M, K] */
    st = rows2d(gz, &t);
    if (!st) st = eng_tensor_transpose(t, 0, 1, &u), eng_tensor_release(t);
    eng_tensor_t *x2;
    if (!st) st = rows2d(x, &x2);
    if (!st) st = eng_op_matmul(u, x2, &gin[1]), eng_tensor_release(x2);
    eng_tensor_release(u);
  }
  if (!st && b && eng_ag_needs(n, 2)) {
    st = rows2d(gz, &t);
    int64_t d0 = 0;
    if (!st) st = eng_op_reduce(ENG_REDUCE_SUM, t, &d0, 1, 0, 0, &gin[2]), eng_tensor_release(t);
  }
  eng_tensor_release(gz);
  return st;
}
const eng_backward_def_t eng_bw_linear = {.fn = linear_bw, .save_in = AG_IN(0) | AG_IN(1) | AG_IN(2)};

/* ---- cat: each input gets its slice of g ---- */
static eng_status_t cat_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  int64_t dim = n->attrs.i[0], at = 0;
  eng_status_t st = ENG_OK;
  for (int k = 0; k < n->n_in && !st; k++) {
    const eng_ag_tmeta_t *m = &n->in_meta[k];
    /* torch lets 1-D empty tensors join anything; they take no slice */
    int64_t len = m->ndim == gout[0]->ndim ? m->shape[dim] : 0;
    if (len && eng_ag_needs(n, k)) st = eng_tensor_narrow(gout[0], dim, at, len, &gin[k]);
    at += len;
  }
  return st;
}
const eng_backward_def_t eng_bw_cat = {.fn = cat_bw};

/* ---- copy (dtype and device changes): the engine converts g back ---- */
static eng_status_t copy_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  (void)n;
  eng_tensor_retain(gout[0]);
  gin[0] = gout[0];
  return ENG_OK;
}
const eng_backward_def_t eng_bw_copy = {.fn = copy_bw};

/* ---- indexing: the gradient is scattered back with index_add / scatter_add ---- */
static eng_status_t zeros_like_input(const eng_ag_node_t *n, int k, const eng_tensor_t *g, eng_tensor_t **out) {
  eng_ag_tmeta_t m = n->in_meta[k];
  m.dtype = g->dtype;
  return eng_ag_zeros(&m, out);
}

/* embedding(ids, weight): rows of g added into the rows of a zero table that the ids picked. */
static eng_status_t embedding_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *ids = eng_ag_in(n, 0), *g = gout[0], *flat_ids, *rows, *z;
  const eng_ag_tmeta_t *w = &n->in_meta[1];
  int64_t rshape[ENG_MAX_DIMS], all = -1;
  rshape[0] = -1;
  for (int d = 1; d < w->ndim; d++) rshape[d] = w->shape[d];
  eng_status_t st = eng_tensor_reshape(ids, &all, 1, &flat_ids);
  if (st) return st;
  st = eng_tensor_reshape(g, rshape, w->ndim, &rows);
  if (!st) st = zeros_like_input(n, 1, g, &z);
  if (!st) st = eng_op_index_add(z, 0, flat_ids, rows, &gin[1]), eng_tensor_release(z);
  eng_tensor_release(rows);
  eng_tensor_release(flat_ids);
  return st;
}
const eng_backward_def_t eng_bw_embedding = {.fn = embedding_bw, .save_in = AG_IN(0), .no_grad_in = AG_IN(0)};

static eng_status_t index_select_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *z;
  eng_status_t st = zeros_like_input(n, 0, gout[0], &z);
  if (st) return st;
  st = eng_op_index_add(z, n->attrs.i[0], eng_ag_in(n, 1), gout[0], &gin[0]);
  eng_tensor_release(z);
  return st;
}
const eng_backward_def_t eng_bw_index_select = {.fn = index_select_bw, .save_in = AG_IN(1), .no_grad_in = AG_IN(1)};

static eng_status_t gather_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *z;
  eng_status_t st = zeros_like_input(n, 0, gout[0], &z);
  if (st) return st;
  st = eng_op_scatter_add(z, n->attrs.i[0], eng_ag_in(n, 1), gout[0], &gin[0]);
  eng_tensor_release(z);
  return st;
}
const eng_backward_def_t eng_bw_gather = {.fn = gather_bw, .save_in = AG_IN(1), .no_grad_in = AG_IN(1)};
