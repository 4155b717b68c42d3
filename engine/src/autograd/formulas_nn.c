/* Backward formulas of the row ops (softmax, norms, cross-entropy: fused kernels) and matmul. */
#include "autograd/autograd_internal.h"
#include "ops/ops_internal.h"

/* ---- softmax, log_softmax: one fused kernel over the rows ---- */
static eng_status_t softmax_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  return eng_op_softmax_backward(gout[0], eng_ag_out(n, 0), n->attrs.i[0], 0, &gin[0]);
}
const eng_backward_def_t eng_bw_softmax = {.fn = softmax_bw, .save_out = AG_IN(0)};

static eng_status_t log_softmax_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  return eng_op_softmax_backward(gout[0], eng_ag_out(n, 0), n->attrs.i[0], 1, &gin[0]);
}
const eng_backward_def_t eng_bw_log_softmax = {.fn = log_softmax_bw, .save_out = AG_IN(0)};

/* ---- norms: the fused backward kernels give every gradient at once ---- */
static eng_status_t rms_norm_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *w = eng_ag_in(n, 1), *gx = NULL, *gw = NULL;
  eng_status_t st = eng_op_rms_norm_backward(gout[0], eng_ag_in(n, 0), w, n->attrs.f[0], &gx, w ? &gw : NULL);
  if (st) return st;
  gin[0] = gx;
  gin[1] = gw;
  return ENG_OK;
}
const eng_backward_def_t eng_bw_rms_norm = {.fn = rms_norm_bw, .save_in = AG_IN(0) | AG_IN(1)};

static eng_status_t layer_norm_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *w = eng_ag_in(n, 1), *b = n->n_in > 2 ? eng_ag_in(n, 2) : NULL;
  eng_tensor_t *gx = NULL, *gw = NULL, *gb = NULL;
  eng_status_t st = eng_op_layer_norm_backward(gout[0], eng_ag_in(n, 0), w, b, n->attrs.f[0], &gx,
                                               w ? &gw : NULL, b ? &gb : NULL);
  if (st) return st;
  gin[0] = gx;
  gin[1] = gw;
  if (n->n_in > 2) gin[2] = gb;
  else eng_tensor_release(gb);
  return ENG_OK;
}
const eng_backward_def_t eng_bw_layer_norm = {.fn = layer_norm_bw, .save_in = AG_IN(0) | AG_IN(1) | AG_IN(2)};

/* ---- cross_entropy: (softmax - onehot) * g / n_valid, computed on the device ---- */
static eng_status_t cross_entropy_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  return eng_op_cross_entropy_backward(eng_ag_in(n, 0), eng_ag_in(n, 1), gout[0], n->attrs.i[0], &gin[0]);
}
const eng_backward_def_t eng_bw_cross_entropy = {.fn = cross_entropy_bw, .save_in = AG_IN(0) | AG_IN(1),
                                                 .no_grad_in = AG_IN(1)};

/* ---- matmul (torch.matmul semantics) ---- */
/* The last two dims swapped (a view). */
static eng_status_t mT(eng_tensor_t *x, eng_tensor_t **out) { return eng_tensor_transpose(x, -1, -2, out); }

/* A product's gradient u, summed to the (matrix-shaped) operand m, then shaped like the input. */
static eng_status_t back_to(eng_tensor_t *u, const eng_tensor_t *m, const eng_ag_tmeta_t *in, eng_tensor_t **out) {
  eng_tensor_t *s;
  eng_status_t st = eng_ag_sum_to(u, m->shape, m->ndim, &s);
  eng_tensor_release(u);
  if (st) return st;
  st = eng_tensor_reshape(s, in->shape, in->ndim, out);
  eng_tensor_release(s);
  return st;
}

static eng_status_t matmul_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *a = eng_ag_in(n, 0), *b = eng_ag_in(n, 1), *a2, *b2, *g2 = NULL, *t, *u;
  /* 1-D operands become matrices (a row on the left, a column on the right), as in the forward */
  eng_status_t st = a->ndim == 1 ? eng_tensor_unsqueeze(a, 0, &a2) : (eng_tensor_retain(a), a2 = a, ENG_OK);
  if (st) return st;
  st = b->ndim == 1 ? eng_tensor_unsqueeze(b, -1, &b2) : (eng_tensor_retain(b), b2 = b, ENG_OK);
  if (st) return eng_tensor_release(a2), st;
  /* g with the matrix dims back */
  int64_t gs[ENG_MAX_DIMS];
  int gn = 0;
  eng_tensor_t *g = gout[0];
  for (int d = 0; d < g->ndim; d++) gs[gn++] = g->shape[d];
  if (a->ndim == 1 && b->ndim == 1) gn = 0;
  if (a->ndim == 1) { /* the row dim was dropped just before the last */
    int at = b->ndim == 1 ? gn : gn - 1;
    for (int d = gn; d > at; d--) gs[d] = gs[d - 1];
    gs[at] = 1;
    gn++;
  }
  if (b->ndim == 1) gs[gn++] = 1;
  st = eng_tensor_reshape(g, gs, gn, &g2);
  if (!st && eng_ag_needs(n, 0)) { /* g b^T, summed over broadcast batch dims */
    st = mT(b2, &t);
    if (!st) st = eng_op_matmul(g2, t, &u), eng_tensor_release(t);
    if (!st) st = back_to(u, a2, &n->in_meta[0], &gin[0]);
  }
  if (!st && eng_ag_needs(n, 1)) { /* a^T g */
    st = mT(a2, &t);
    if (!st) st = eng_op_matmul(t, g2, &u), eng_tensor_release(t);
    if (!st) st = back_to(u, b2, &n->in_meta[1], &gin[1]);
  }
  eng_tensor_release(g2);
  eng_tensor_release(a2);
  eng_tensor_release(b2);
  return st;
}
const eng_backward_def_t eng_bw_matmul = {.fn = matmul_bw, .save_in = AG_IN(0) | AG_IN(1)};
