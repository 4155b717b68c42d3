/* Backward formulas of the reductions: sum, mean, max, min, var, std over a set of dims. */
#include "autograd/autograd_internal.h"
#include "ops/ops_internal.h"

/* How many elements each output entry reduced. */
static int64_t reduced_count(const eng_ag_node_t *n) {
  const eng_ag_tmeta_t *m = &n->in_meta[0];
  int64_t c = 1;
  if (n->attrs.ni == 0)
    for (int d = 0; d < m->ndim; d++) c *= m->shape[d];
  for (int k = 0; k < n->attrs.ni; k++) c *= m->shape[n->attrs.i[k]];
  return c;
}

/* x minus its mean over the reduced dims (kept as size-1 dims). */
static eng_status_t centered(const eng_ag_node_t *n, eng_tensor_t *x, eng_tensor_t **out) {
  eng_tensor_t *mu;
  eng_status_t st = eng_op_reduce(ENG_REDUCE_MEAN, x, n->attrs.i, n->attrs.ni, 1, 0, &mu);
  if (st) return st;
  return eng_ag_bin(ENG_BINARY_SUB, x, mu, 2, out);
}

static eng_status_t reduce_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_reduce_op_t op = (eng_reduce_op_t)(n->op - ENG_OP_SUM);
  eng_tensor_t *x = eng_ag_in(n, 0), *y = eng_ag_out(n, 0), *g, *t, *u;
  eng_status_t st = eng_ag_unreduce(gout[0], &n->in_meta[0], &n->attrs, &g);
  if (st) return st;
  double count = (double)reduced_count(n), dof = count - n->attrs.f[0];
  switch (op) {
  case ENG_REDUCE_SUM:
    gin[0] = g;
    return ENG_OK;
  case ENG_REDUCE_MEAN:
    st = eng_ag_mul_scalar(g, 1.0 / count, &gin[0]);
    break;
  case ENG_REDUCE_MAX:
  case ENG_REDUCE_MIN: { /* shared equally among the entries that reached the extreme */
    eng_tensor_t *ye, *hit, *hf, *cnt;
    st = eng_ag_unreduce(y, &n->in_meta[0], &n->attrs, &ye);
    if (!st) st = eng_ag_bin(ENG_BINARY_EQ, x, ye, 2, &hit);
    if (!st) st = eng_tensor_to_dtype(hit, g->dtype, &hf), eng_tensor_release(hit);
    if (st) break;
    st = eng_op_reduce(ENG_REDUCE_SUM, hf, n->attrs.i, n->attrs.ni, 1, 0, &cnt);
    if (!st) st = eng_ag_bin(ENG_BINARY_DIV, hf, cnt, 2, &t);
    eng_tensor_release(hf);
    if (!st) st = eng_ag_bin(ENG_BINARY_MUL, g, t, 2, &gin[0]);
    break;
  }
  case ENG_REDUCE_VAR: /* g * 2 (x - mean) / dof */
    st = centered(n, x, &t);
    if (!st) st = eng_ag_mul_scalar(t, 2.0 / dof, &u), eng_tensor_release(t);
    if (!st) st = eng_ag_bin(ENG_BINARY_MUL, g, u, 2, &gin[0]);
    break;
  case ENG_REDUCE_STD: { /* g * (x - mean) / (dof * std) */
    eng_tensor_t *ye;
    st = centered(n, x, &t);
    if (!st) st = eng_ag_unreduce(y, &n->in_meta[0], &n->attrs, &ye);
    if (!st) st = eng_ag_bin(ENG_BINARY_DIV, t, ye, 3, &u);
    else eng_tensor_release(t);
    if (!st) st = eng_ag_mul_scalar(u, 1.0 / dof, &t), eng_tensor_release(u);
    if (!st) st = eng_ag_bin(ENG_BINARY_MUL, g, t, 2, &gin[0]);
    break;
  }
  default:
    st = eng_error(ENG_ERR_INTERNAL, "backward: no formula for %s", n->name);
  }
  eng_tensor_release(g);
  return st;
}
const eng_backward_def_t eng_bw_reduce = {.fn = reduce_bw, .save_in = AG_IN(0), .save_out = AG_IN(0)};
