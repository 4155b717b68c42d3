/* Backward formulas of the fused ops whose gradients are their own kernels: add_rms_norm and the
 * E-series recurrences (e1, e23, e88). Their forwards keep what the backward kernels need as extra
 * outputs (the h sequence, state checkpoints), which the node saves. */
#include "autograd/autograd_internal.h"
#include "ops/ops_internal.h"

/* ---- add_rms_norm(x, residual, w) -> y, residual_out = residual + x (f32) ----
 * residual_out reaches y through rms_norm and the next block directly: its gradient is the sum of
 * both, and it is also the gradient of x and of residual. */
static eng_status_t add_rms_norm_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *w = eng_ag_in(n, 2), *gr = NULL, *gw = NULL, *total;
  eng_status_t st = eng_op_rms_norm_backward(gout[0], eng_ag_out(n, 1), w, n->attrs.f[0], &gr, w ? &gw : NULL);
  if (st) return st;
  st = eng_ag_bin(ENG_BINARY_ADD, gr, gout[1], 1, &total);
  if (st) return eng_tensor_release(gw), st;
  gin[0] = total;
  if (n->in_meta[1].ndim >= 0) {
    eng_tensor_retain(total);
    gin[1] = total;
  }
  gin[2] = gw;
  return ENG_OK;
}
const eng_backward_def_t eng_bw_add_rms_norm = {.fn = add_rms_norm_bw, .save_in = AG_IN(2), .save_out = AG_IN(1)};

/* ---- e1(xw, z, W_h, b, h0) -> y, h_T, hs ---- */
static eng_status_t e1_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *dh0 = NULL;
  eng_status_t st = eng_op_e1_backward(eng_ag_in(n, 1), eng_ag_in(n, 2), eng_ag_in(n, 4), eng_ag_out(n, 2), gout[0],
                                       gout[1], &gin[0], &gin[1], &gin[2], &gin[3], &dh0);
  if (st) return st;
  if (n->in_meta[4].ndim >= 0) gin[4] = dh0;
  else eng_tensor_release(dh0);
  return ENG_OK;
}
const eng_backward_def_t eng_bw_e1 = {.fn = e1_bw, .save_in = AG_IN(1) | AG_IN(2) | AG_IN(4), .save_out = AG_IN(2), .optional_gout = AG_IN(1) | AG_IN(2)};

/* ---- e23(xw, W_h, W_write, b, h0, tape0) -> hs, h_T, tape_T, ckpt ---- */
static eng_status_t e23_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  eng_tensor_t *dh0 = NULL, *dtape0 = NULL;
  eng_status_t st = eng_op_e23_backward(eng_ag_in(n, 0), eng_ag_in(n, 1), eng_ag_in(n, 2), eng_ag_in(n, 3),
                                        eng_ag_in(n, 4), eng_ag_out(n, 0), eng_ag_out(n, 3), gout[0], gout[1],
                                        gout[2], n->attrs.i[1], &gin[0], &gin[1], &gin[2], &gin[3], &dh0,
                                        &dtape0);
  if (st) return st;
  if (n->in_meta[4].ndim >= 0) gin[4] = dh0;
  else eng_tensor_release(dh0);
  if (n->in_meta[5].ndim >= 0) gin[5] = dtape0;
  else eng_tensor_release(dtape0);
  return ENG_OK;
}
const eng_backward_def_t eng_bw_e23 = {.fn = e23_bw, .save_in = AG_IN(0) | AG_IN(1) | AG_IN(2) | AG_IN(3) | AG_IN(4),
                                       .save_out = AG_IN(0) | AG_IN(3), .optional_gout = AG_IN(1) | AG_IN(2) | AG_IN(3)};

/* ---- e88(q, k, v, decay, g, S0) -> y, S_T, ckpt ---- */
static eng_status_t e88_bw(eng_ag_node_t *n, eng_tensor_t *const *gout, eng_tensor_t **gin) {
  if (n->n_out < 3)
    return eng_error(ENG_ERR_ARG, "backward of e88: the forward ran without its state checkpoints");
  eng_e88_opts_t o = {.l2 = !(n->attrs.flags & ENG_ATTR_E88_NO_L2),
                      .linear_state = (n->attrs.flags & ENG_ATTR_E88_LINEAR) != 0,
                      .ckpt_every = (int)n->attrs.i[0]};  /* 0: the op's default */
  eng_e88_grads_t g = {0};
  eng_status_t st = eng_op_e88_backward(eng_ag_in(n, 0), eng_ag_in(n, 1), eng_ag_in(n, 2), eng_ag_in(n, 3),
                                        eng_ag_in(n, 4), eng_ag_in(n, 5), eng_ag_out(n, 2), gout[0], gout[1], &o, &g);
  if (st) return st;
  gin[0] = g.dq;
  gin[1] = g.dk;
  gin[2] = g.dv;
  gin[3] = g.ddecay;
  gin[4] = g.dg;
  gin[5] = g.dS0;
  return ENG_OK;
}
const eng_backward_def_t eng_bw_e88 = {.fn = e88_bw, .save_in = AG_IN(0) | AG_IN(1) | AG_IN(2) | AG_IN(3) | AG_IN(4) | AG_IN(5),
                                       .save_out = AG_IN(2), .optional_gout = AG_IN(1) | AG_IN(2)};
