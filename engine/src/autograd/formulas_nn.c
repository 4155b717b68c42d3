/* Backward formulas of the row ops (softmax, norms, cross-entropy), matmul/linear, cat and copy. */
#include <math.h>

#include "autograd/autograd_internal.h"
#include "ops/ops_internal.h"

static eng_status_t sum_last(eng_tensor_t *x, int64_t dim, eng_tensor_t **out) {
  return eng_op_reduce(ENG_REDUCE_SUM, x, &dim, 1, 1, 0, out);
}
static eng_status_t mean_last(eng_tensor_t *x, eng_tensor_t **out) {
  int64_t d = x->ndim - 1;
  return eng_op_reduce(ENG_REDUCE_MEAN, x, &d, 1, 1, 0, out);
}

/* ---- softmax: gx = y (g - sum(g y)); log_softmax: gx = g - exp(y) sum(g) ---- */
static eng_status_t softmax_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *y = eng_ag_out(n, 0), *g = gout[0], *t, *s;
  eng_status_t st = eng_op_binary(ENG_BINARY_MUL, g, y, &t);
  if (!st) st = sum_last(t, n->attrs.i[0], &s), eng_tensor_release(t);
  if (!st) st = eng_ag_bin(ENG_BINARY_SUB, g, s, 2, &t);
  if (!st) st = eng_ag_bin(ENG_BINARY_MUL, y, t, 2, &gin[0]);
  return st;
}
const eng_backward_def_t eng_bw_softmax = {.fn = softmax_bw, .save_out = AG_IN(0)};

static eng_status_t log_softmax_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *y = eng_ag_out(n, 0), *g = gout[0], *p, *s, *t;
  eng_status_t st = sum_last(g, n->attrs.i[0], &s);
  if (!st) st = eng_op_unary(ENG_UNARY_EXP, y, &p);
  else return st;
  if (!st) st = eng_ag_bin(ENG_BINARY_MUL, p, s, 3, &t);
  else eng_tensor_release(s);
  if (!st) st = eng_ag_bin(ENG_BINARY_SUB, g, t, 2, &gin[0]);
  return st;
}
const eng_backward_def_t eng_bw_log_softmax = {.fn = log_softmax_bw, .save_out = AG_IN(0)};

/* Sums over every dim but the last (the weight/bias gradient of a row op). */
static eng_status_t sum_rows(eng_tensor_t *x, eng_tensor_t **out) {
  if (x->ndim == 1) {
    eng_tensor_retain(x);
    *out = x;
    return ENG_OK;
  }
  int64_t dims[ENG_MAX_DIMS];
  for (int d = 0; d < x->ndim - 1; d++) dims[d] = d;
  return eng_op_reduce(ENG_REDUCE_SUM, x, dims, x->ndim - 1, 0, 0, out);
}

/* ---- rms_norm: y = x r w, r = 1/sqrt(mean(x^2) + eps) ----
 * gx = r (gw - x r^2 mean(gw x)), gw = g w; dW = sum_rows(g x r). */
static eng_status_t rms_norm_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *x = eng_ag_in(n, 0), *w = eng_ag_in(n, 1), *g = gout[0];
  eng_tensor_t *x2, *ms, *eps, *r, *gw, *t, *u;
  eng_status_t st = eng_op_binary(ENG_BINARY_MUL, x, x, &x2);
  if (st) return st;
  st = mean_last(x2, &ms);
  eng_tensor_release(x2);
  if (!st) st = eng_ag_scalar(ms, n->attrs.f[0], &eps);
  if (!st) st = eng_ag_bin(ENG_BINARY_ADD, ms, eps, 3, &t);
  if (!st) st = eng_op_unary(ENG_UNARY_RSQRT, t, &r), eng_tensor_release(t);
  if (st) return st;
  if (w) st = eng_op_binary(ENG_BINARY_MUL, g, w, &gw);
  else eng_tensor_retain(g), gw = g;
  if (!st && eng_ag_needs(n, 0)) {
    eng_tensor_t *r3;
    st = eng_op_binary(ENG_BINARY_MUL, gw, x, &t);
    if (!st) st = mean_last(t, &u), eng_tensor_release(t);
    if (!st) st = eng_op_binary(ENG_BINARY_MUL, r, r, &t);
    if (!st) st = eng_ag_bin(ENG_BINARY_MUL, t, r, 1, &r3);
    if (!st) st = eng_ag_bin(ENG_BINARY_MUL, u, r3, 3, &t);          /* mean(gw x) r^3 */
    if (!st) st = eng_ag_bin(ENG_BINARY_MUL, x, t, 2, &u);           /* x r^3 mean(gw x) */
    if (!st) st = eng_op_binary(ENG_BINARY_MUL, gw, r, &t);
    if (!st) st = eng_ag_bin(ENG_BINARY_SUB, t, u, 3, &gin[0]);
  }
  if (!st && w && eng_ag_needs(n, 1)) {
    st = eng_op_binary(ENG_BINARY_MUL, x, r, &t);
    if (!st) st = eng_ag_bin(ENG_BINARY_MUL, g, t, 2, &u);
    if (!st) st = sum_rows(u, &gin[1]), eng_tensor_release(u);
  }
  eng_tensor_release(gw);
  eng_tensor_release(r);
  return st;
}
const eng_backward_def_t eng_bw_rms_norm = {.fn = rms_norm_bw, .save_in = AG_IN(0) | AG_IN(1)};

/* ---- layer_norm: xhat = (x - mu) r, y = xhat w + b ----
 * gx = r (gh - mean(gh) - xhat mean(gh xhat)), gh = g w; dW = sum_rows(g xhat); db = sum_rows(g). */
static eng_status_t layer_norm_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *x = eng_ag_in(n, 0), *w = eng_ag_in(n, 1), *g = gout[0];
  eng_tensor_t *mu, *xc, *var, *eps, *r, *xhat, *gh, *t, *u;
  eng_status_t st = mean_last(x, &mu);
  if (!st) st = eng_ag_bin(ENG_BINARY_SUB, x, mu, 2, &xc);
  if (st) return st;
  st = eng_op_binary(ENG_BINARY_MUL, xc, xc, &t);
  if (!st) st = mean_last(t, &var), eng_tensor_release(t);
  if (!st) st = eng_ag_scalar(var, n->attrs.f[0], &eps);
  if (!st) st = eng_ag_bin(ENG_BINARY_ADD, var, eps, 3, &t);
  if (!st) st = eng_op_unary(ENG_UNARY_RSQRT, t, &r), eng_tensor_release(t);
  if (!st) st = eng_ag_bin(ENG_BINARY_MUL, xc, r, 1, &xhat);
  else eng_tensor_release(xc);
  if (st) return st;
  if (w) st = eng_op_binary(ENG_BINARY_MUL, g, w, &gh);
  else eng_tensor_retain(g), gh = g;
  if (!st && eng_ag_needs(n, 0)) {
    eng_tensor_t *m1, *m2;
    st = mean_last(gh, &m1);
    if (!st) st = eng_op_binary(ENG_BINARY_MUL, gh, xhat, &t);
    if (!st) st = mean_last(t, &m2), eng_tensor_release(t);
    if (!st) st = eng_ag_bin(ENG_BINARY_MUL, xhat, m2, 2, &u);
    if (!st) st = eng_ag_bin(ENG_BINARY_SUB, gh, m1, 2, &t);
    if (!st) st = eng_ag_bin(ENG_BINARY_SUB, t, u, 3, &m1);
    if (!st) st = eng_ag_bin(ENG_BINARY_MUL, m1, r, 1, &gin[0]);
  }
  if (!st && w && eng_ag_needs(n, 1)) {
    st = eng_op_binary(ENG_BINARY_MUL, g, xhat, &t);
    if (!st) st = sum_rows(t, &gin[1]), eng_tensor_release(t);
  }
  if (!st && n->n_in > 2 && n->in_meta[2].ndim >= 0 && eng_ag_needs(n, 2)) st = sum_rows(g, &gin[2]);
  eng_tensor_release(gh);
  eng_tensor_release(xhat);
  eng_tensor_release(r);
  return st;
}
const eng_backward_def_t eng_bw_layer_norm = {.fn = layer_norm_bw, .save_in = AG_IN(0) | AG_IN(1)};

/* ---- cross_entropy (mean over valid targets): (softmax - onehot) * valid * g / n_valid ---- */
static eng_status_t cross_entropy_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *logits = eng_ag_in(n, 0), *tg = eng_ag_in(n, 1);
  int64_t c = logits->shape[logits->ndim - 1], last = logits->ndim - 1;
  eng_tensor_t *x, *p, *cls, *tu, *hot, *hf, *ign, *valid, *vf, *nv, *t, *u;
  /* in f32 (f64 for f64): bf16 logits would round the probabilities too coarsely */
  eng_dtype_t dt = logits->dtype == ENG_F64 ? ENG_F64 : ENG_F32;
  eng_status_t st = eng_ag_as(logits, dt, &x);
  if (st) return st;
  st = eng_op_softmax(x, last, &p);
  eng_tensor_release(x);
  if (st) return st;
  st = eng_tensor_arange(0, (double)c, 1, tg->dtype, eng_tensor_device(tg), &cls);
  if (!st) st = eng_tensor_unsqueeze(tg, -1, &tu);
  if (!st) st = eng_ag_bin(ENG_BINARY_EQ, tu, cls, 3, &hot);
  if (!st) st = eng_ag_as(hot, dt, &hf), eng_tensor_release(hot);
  if (!st) st = eng_ag_bin(ENG_BINARY_SUB, p, hf, 3, &t); /* softmax - onehot */
  else eng_tensor_release(p);
  if (st) return st;
  st = eng_tensor_full(NULL, 0, (double)n->attrs.i[0], tg->dtype, eng_tensor_device(tg), &ign);
  if (!st) st = eng_ag_bin(ENG_BINARY_NE, tg, ign, 2, &valid);
  if (!st) st = eng_ag_as(valid, dt, &vf), eng_tensor_release(valid);
  if (!st) st = eng_op_reduce(ENG_REDUCE_SUM, vf, NULL, 0, 0, 0, &nv);
  if (!st) st = eng_ag_as(gout[0], dt, &u);
  if (!st) st = eng_ag_bin(ENG_BINARY_DIV, u, nv, 3, &u);            /* g / n_valid */
  if (!st) st = eng_ag_bin(ENG_BINARY_MUL, vf, u, 3, &u);            /* per row */
  else eng_tensor_release(vf);
  if (!st) st = eng_tensor_unsqueeze(u, -1, &vf), eng_tensor_release(u);
  if (!st) st = eng_ag_bin(ENG_BINARY_MUL, t, vf, 2, &gin[0]);
  eng_tensor_release(t);
  return st;
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
