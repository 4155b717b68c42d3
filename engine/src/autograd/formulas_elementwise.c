/* Backward formulas of the elementwise ops: unary, binary (broadcasting), clamp and where. */
#include <math.h>

#include "autograd/autograd_internal.h"
#include "ops/ops_internal.h"

/* g * f, consuming f. */
static eng_status_t times(eng_tensor_t *g, eng_tensor_t *f, eng_tensor_t **out) {
  return eng_ag_bin(ENG_BINARY_MUL, g, f, 2, out);
}

/* 1 - y*y (tanh'), y*(1-y) (sigmoid') and friends, as new tensors. */
static eng_status_t one_minus(eng_tensor_t *a, eng_tensor_t **out) {
  eng_tensor_t *one;
  eng_status_t st = eng_ag_scalar(a, 1.0, &one);
  if (st) return st;
  return eng_ag_bin(ENG_BINARY_SUB, one, a, 1, out);
}

/* d/dx of the unary op at x (output y), as a tensor to multiply g with. */
static eng_status_t unary_slope(eng_unary_op_t op, eng_tensor_t *x, eng_tensor_t *y, eng_tensor_t **out) {
  eng_tensor_t *a = NULL, *b = NULL;
  eng_status_t st;
  switch (op) {
  case ENG_UNARY_NEG:
    return eng_ag_scalar(x, -1.0, out);
  case ENG_UNARY_ABS: { /* sign(x), 0 at 0 */
    eng_tensor_t *zero;
    if ((st = eng_ag_scalar(x, 0.0, &zero))) return st;
    st = eng_op_binary(ENG_BINARY_GT, x, zero, &a);
    if (!st) st = eng_op_binary(ENG_BINARY_LT, x, zero, &b);
    eng_tensor_release(zero);
    if (!st) st = eng_tensor_to_dtype(a, x->dtype, out);
    eng_tensor_t *neg = NULL;
    if (!st) st = eng_tensor_to_dtype(b, x->dtype, &neg);
    if (!st) {
      eng_tensor_t *pos = *out;
      st = eng_ag_bin(ENG_BINARY_SUB, pos, neg, 3, out);
    }
    eng_tensor_release(a);
    eng_tensor_release(b);
    return st;
  }
  case ENG_UNARY_EXP:
    eng_tensor_retain(y);
    *out = y;
    return ENG_OK;
  case ENG_UNARY_LOG: { /* 1/x */
    eng_tensor_t *one;
    if ((st = eng_ag_scalar(x, 1.0, &one))) return st;
    return eng_ag_bin(ENG_BINARY_DIV, one, x, 1, out);
  }
  case ENG_UNARY_SQRT: /* 1/(2y) */
    if ((st = eng_ag_mul_scalar(y, 2.0, &a))) return st;
    if ((st = eng_ag_scalar(x, 1.0, &b))) {
      eng_tensor_release(a);
      return st;
    }
    return eng_ag_bin(ENG_BINARY_DIV, b, a, 3, out);
  case ENG_UNARY_RSQRT: /* -y^3/2 */
    if ((st = eng_op_binary(ENG_BINARY_MUL, y, y, &a))) return st;
    if ((st = eng_ag_bin(ENG_BINARY_MUL, a, y, 1, &b))) return st;
    st = eng_ag_mul_scalar(b, -0.5, out);
    eng_tensor_release(b);
    return st;
  case ENG_UNARY_TANH: /* 1 - y^2 */
    if ((st = eng_op_binary(ENG_BINARY_MUL, y, y, &a))) return st;
    st = one_minus(a, out);
    eng_tensor_release(a);
    return st;
  case ENG_UNARY_SIGMOID: /* y(1-y) */
    if ((st = one_minus(y, &a))) return st;
    return eng_ag_bin(ENG_BINARY_MUL, y, a, 2, out);
  case ENG_UNARY_SILU: { /* s(1 + x(1-s)), s = sigmoid(x) */
    eng_tensor_t *s, *t;
    if ((st = eng_op_unary(ENG_UNARY_SIGMOID, x, &s))) return st;
    st = one_minus(s, &a);
    if (!st) st = eng_ag_bin(ENG_BINARY_MUL, x, a, 2, &b);
    if (!st) {
      eng_tensor_t *one;
      st = eng_ag_scalar(x, 1.0, &one);
      if (!st) st = eng_ag_bin(ENG_BINARY_ADD, b, one, 3, &t);
      else eng_tensor_release(b);
      if (!st) st = eng_ag_bin(ENG_BINARY_MUL, s, t, 2, out);
    }
    eng_tensor_release(s);
    return st;
  }
  case ENG_UNARY_GELU: { /* Phi(x) + x phi(x); Phi(x) = gelu(x)/x (1/2 at 0) */
    eng_tensor_t *phi_cdf, *half, *zero, *is0, *x2, *e, *xe;
    if ((st = eng_op_binary(ENG_BINARY_DIV, y, x, &a))) return st;
    st = eng_ag_scalar(x, 0.5, &half);
    if (!st) st = eng_ag_scalar(x, 0.0, &zero);
    if (st) return eng_tensor_release(a), st;
    st = eng_op_binary(ENG_BINARY_EQ, x, zero, &is0);
    eng_tensor_release(zero);
    if (!st) st = eng_op_where(is0, half, a, &phi_cdf);
    eng_tensor_release(is0);
    eng_tensor_release(half);
    eng_tensor_release(a);
    if (st) return st;
    st = eng_op_binary(ENG_BINARY_MUL, x, x, &x2);
    if (!st) st = eng_ag_mul_scalar(x2, -0.5, &b), eng_tensor_release(x2);
    if (!st) st = eng_op_unary(ENG_UNARY_EXP, b, &e), eng_tensor_release(b);
    if (!st) st = eng_op_binary(ENG_BINARY_MUL, x, e, &xe), eng_tensor_release(e);
    if (!st) st = eng_ag_mul_scalar(xe, 1.0 / sqrt(2.0 * M_PI), &b), eng_tensor_release(xe);
    if (!st) return eng_ag_bin(ENG_BINARY_ADD, phi_cdf, b, 3, out);
    eng_tensor_release(phi_cdf);
    return st;
  }
  case ENG_UNARY_RELU: {
    eng_tensor_t *zero;
    if ((st = eng_ag_scalar(x, 0.0, &zero))) return st;
    st = eng_ag_bin(ENG_BINARY_GT, x, zero, 2, &a);
    if (!st) st = eng_tensor_to_dtype(a, x->dtype, out), eng_tensor_release(a);
    return st;
  }
  case ENG_UNARY_SOFTPLUS:
    return eng_op_unary(ENG_UNARY_SIGMOID, x, out);
  default:
    return eng_error(ENG_ERR_INTERNAL, "backward: no formula for unary op %d", (int)op);
  }
}

static eng_status_t unary_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *slope;
  eng_status_t st = unary_slope((eng_unary_op_t)(n->op - ENG_OP_NEG), eng_ag_in(n, 0), eng_ag_out(n, 0), &slope);
  if (st) return st;
  return times(gout[0], slope, &gin[0]);
}
const eng_backward_def_t eng_bw_unary = {.fn = unary_bw, .save_in = AG_IN(0), .save_out = AG_IN(0)};

/* ---- binary ---- */

/* r reduced to input k's shape; consumes r. */
static eng_status_t to_input(eng_ag_node_t *n, int k, eng_tensor_t *r, eng_tensor_t **out) {
  eng_status_t st = eng_ag_sum_to(r, n->in_meta[k].shape, n->in_meta[k].ndim, out);
  eng_tensor_release(r);
  return st;
}

/* For maximum/minimum: the share of g each side gets (1 where it wins, 1/2 on ties). */
static eng_status_t winner_share(eng_binary_op_t win, eng_tensor_t *a, eng_tensor_t *b, eng_dtype_t dt,
                                 eng_tensor_t **out) {
  eng_tensor_t *w, *eq, *wf, *ef, *half;
  eng_status_t st = eng_op_binary(win, a, b, &w);
  if (st) return st;
  st = eng_op_binary(ENG_BINARY_EQ, a, b, &eq);
  if (!st) st = eng_tensor_to_dtype(w, dt, &wf);
  eng_tensor_release(w);
  if (!st) st = eng_tensor_to_dtype(eq, dt, &ef);
  eng_tensor_release(eq);
  if (st) return st;
  st = eng_ag_mul_scalar(ef, 0.5, &half);
  eng_tensor_release(ef);
  if (st) return eng_tensor_release(wf), st;
  return eng_ag_bin(ENG_BINARY_ADD, wf, half, 3, out);
}

static eng_status_t binary_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_binary_op_t op = (eng_binary_op_t)(n->op - ENG_OP_ADD);
  eng_tensor_t *g = gout[0], *a = eng_ag_in(n, 0), *b = eng_ag_in(n, 1), *y = eng_ag_out(n, 0);
  eng_tensor_t *r = NULL, *t = NULL;
  eng_status_t st = ENG_OK;
  for (int k = 0; k < 2 && !st; k++) {
    if (!eng_ag_needs(n, k)) continue;
    switch (op) {
    case ENG_BINARY_ADD:
      eng_tensor_retain(g);
      r = g;
      break;
    case ENG_BINARY_SUB:
      if (k == 0) eng_tensor_retain(g), r = g;
      else st = eng_op_unary(ENG_UNARY_NEG, g, &r);
      break;
    case ENG_BINARY_MUL:
      st = eng_op_binary(ENG_BINARY_MUL, g, k == 0 ? b : a, &r);
      break;
    case ENG_BINARY_DIV: /* ga = g/b, gb = -g*y/b */
      if (k == 0) {
        st = eng_op_binary(ENG_BINARY_DIV, g, b, &r);
      } else {
        st = eng_op_binary(ENG_BINARY_MUL, g, y, &t);
        if (!st) st = eng_ag_bin(ENG_BINARY_DIV, t, b, 1, &t);
        if (!st) st = eng_op_unary(ENG_UNARY_NEG, t, &r), eng_tensor_release(t);
      }
      break;
    case ENG_BINARY_POW:
      if (k == 0) { /* g * b * a^(b-1) = g * b * y / a, written without dividing by a = 0 */
        eng_tensor_t *one, *bm1;
        st = eng_ag_scalar(b, 1.0, &one);
        if (!st) st = eng_ag_bin(ENG_BINARY_SUB, b, one, 2, &bm1);
        if (!st) st = eng_ag_bin(ENG_BINARY_POW, a, bm1, 2, &t);
        if (!st) st = eng_ag_bin(ENG_BINARY_MUL, t, b, 1, &t);
        if (!st) st = eng_ag_bin(ENG_BINARY_MUL, g, t, 2, &r);
      } else { /* g * y * log(a), 0 where a <= 0 */
        eng_tensor_t *la, *zero, *pos;
        st = eng_op_unary(ENG_UNARY_LOG, a, &la);
        if (!st) st = eng_ag_scalar(a, 0.0, &zero);
        if (!st) st = eng_ag_bin(ENG_BINARY_GT, a, zero, 2, &pos);
        if (!st) st = eng_ag_bin(ENG_BINARY_MUL, y, la, 2, &t);
        if (!st) st = eng_ag_bin(ENG_BINARY_MUL, g, t, 2, &t);
        if (!st) st = eng_ag_mask(pos, t, &r), eng_tensor_release(t);
        eng_tensor_release(pos);
      }
      break;
    case ENG_BINARY_MAXIMUM:
    case ENG_BINARY_MINIMUM: {
      eng_binary_op_t win = (op == ENG_BINARY_MAXIMUM) == (k == 0) ? ENG_BINARY_GT : ENG_BINARY_LT;
      st = winner_share(win, a, b, g->dtype, &t);
      if (!st) st = eng_ag_bin(ENG_BINARY_MUL, g, t, 2, &r);
      break;
    }
    default:
      st = eng_error(ENG_ERR_INTERNAL, "backward: %s is not differentiable", n->name);
    }
    if (!st) st = to_input(n, k, r, &gin[k]);
    r = t = NULL;
  }
  return st;
}
const eng_backward_def_t eng_bw_binary = {.fn = binary_bw, .save_in = AG_IN(0) | AG_IN(1), .save_out = AG_IN(0)};

/* ---- clamp: g where lo <= x <= hi ---- */
static eng_status_t clamp_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *x = eng_ag_in(n, 0), *y = eng_ag_out(n, 0), *inside;
  /* x inside the range exactly where clamping left it unchanged */
  eng_status_t st = eng_op_binary(ENG_BINARY_EQ, x, y, &inside);
  if (st) return st;
  st = eng_ag_mask(inside, gout[0], &gin[0]);
  eng_tensor_release(inside);
  return st;
}
const eng_backward_def_t eng_bw_clamp = {.fn = clamp_bw, .save_in = AG_IN(0), .save_out = AG_IN(0)};

/* ---- where(cond, a, b) ---- */
static eng_status_t where_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *cond = eng_ag_in(n, 0), *zero, *r;
  eng_status_t st = eng_ag_scalar(gout[0], 0.0, &zero);
  for (int k = 1; k < 3 && !st; k++) {
    if (!eng_ag_needs(n, k)) continue;
    st = k == 1 ? eng_op_where(cond, gout[0], zero, &r) : eng_op_where(cond, zero, gout[0], &r);
    if (!st) st = to_input(n, k, r, &gin[k]);
  }
  eng_tensor_release(zero);
  return st;
}
const eng_backward_def_t eng_bw_where = {.fn = where_bw, .save_in = AG_IN(0), .no_grad_in = AG_IN(0)};
