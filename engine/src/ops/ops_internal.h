/* Shape rules and backend kernels of the registry's ops, as the table in registry.c names them.
 * Each family file (elementwise.c, reduce.c, ...) defines its own. A kernel named eng_cpu_* runs on
 * host memory and calls into kernels/cpu/; the CUDA backend adds eng_cuda_* beside them. */
#ifndef ENG_OPS_INTERNAL_H
#define ENG_OPS_INTERNAL_H

#include "eng_registry.h"

/* Attr bit flags */
#define ENG_ATTR_KEEPDIM 1   /* reductions, argmax */
#define ENG_ATTR_FLATTEN 2   /* argmax over all elements */
#define ENG_ATTR_HAS_LO 1    /* clamp */
#define ENG_ATTR_HAS_HI 2    /* clamp */
#define ENG_ATTR_LINSPACE 1  /* arange: last element is exactly f[2] */

/* elementwise.c */
eng_status_t eng_infer_unary(eng_op_call_t *call);
eng_status_t eng_cpu_unary(const eng_op_call_t *call);
eng_status_t eng_infer_binary(eng_op_call_t *call);
eng_status_t eng_cpu_binary(const eng_op_call_t *call);
eng_status_t eng_infer_clamp(eng_op_call_t *call);
eng_status_t eng_cpu_clamp(const eng_op_call_t *call);
eng_status_t eng_infer_where(eng_op_call_t *call);
eng_status_t eng_cpu_where(const eng_op_call_t *call);
/* reduce.c */
eng_status_t eng_infer_reduce(eng_op_call_t *call);
eng_status_t eng_cpu_reduce(const eng_op_call_t *call);
eng_status_t eng_infer_argmax(eng_op_call_t *call);
eng_status_t eng_cpu_argmax(const eng_op_call_t *call);
/* norm.c */
eng_status_t eng_infer_softmax(eng_op_call_t *call);
eng_status_t eng_cpu_softmax(const eng_op_call_t *call); /* softmax and log_softmax */
eng_status_t eng_infer_norm(eng_op_call_t *call);
eng_status_t eng_cpu_layer_norm(const eng_op_call_t *call);
eng_status_t eng_cpu_rms_norm(const eng_op_call_t *call);
/* loss.c */
eng_status_t eng_infer_cross_entropy(eng_op_call_t *call);
eng_status_t eng_cpu_cross_entropy(const eng_op_call_t *call);
/* matmul.c */
eng_status_t eng_infer_matmul(eng_op_call_t *call);
eng_status_t eng_cpu_matmul(const eng_op_call_t *call);
/* linear.c: in[0] x, in[1] W, in[2] b (optional), attrs.i[0] an eng_act_t */
eng_status_t eng_infer_linear(eng_op_call_t *call);
eng_status_t eng_cpu_linear(const eng_op_call_t *call);
/* index.c */
eng_status_t eng_infer_embedding(eng_op_call_t *call);
eng_status_t eng_cpu_embedding(const eng_op_call_t *call);
eng_status_t eng_infer_index_select(eng_op_call_t *call);
eng_status_t eng_cpu_index_select(const eng_op_call_t *call);
eng_status_t eng_infer_gather(eng_op_call_t *call);
eng_status_t eng_cpu_gather(const eng_op_call_t *call);
eng_status_t eng_infer_cat(eng_op_call_t *call);
eng_status_t eng_cpu_cat(const eng_op_call_t *call);
/* copy.c */
eng_status_t eng_infer_copy(eng_op_call_t *call);
eng_status_t eng_cpu_copy(const eng_op_call_t *call);
eng_status_t eng_infer_fill(eng_op_call_t *call);
eng_status_t eng_cpu_fill(const eng_op_call_t *call);
/* create.c: outputs of shape attrs.i[0..ni-1], dtype attrs.dtype, on attrs.device */
eng_status_t eng_infer_create(eng_op_call_t *call);
eng_status_t eng_cpu_arange(const eng_op_call_t *call);
eng_status_t eng_cpu_eye(const eng_op_call_t *call);
eng_status_t eng_cpu_rand(const eng_op_call_t *call);
eng_status_t eng_cpu_randn(const eng_op_call_t *call);
eng_status_t eng_cpu_randint(const eng_op_call_t *call);
/* backward kernels: norm_backward.c (softmax_backward: in gy, y; attrs i[0] dim, i[1] log.
 * rms/layer_norm_backward: in gy, x, w[, b]; f[0] eps; outputs gx, then gw and gb when w and b
 * are given), loss_backward.c (in logits, targets, gloss; i[0] ignore_index), add_rms_norm.c (in
 * x, residual, w; f[0] eps; outputs y, residual_out) */
eng_status_t eng_infer_softmax_backward(eng_op_call_t *call);
eng_status_t eng_cpu_softmax_backward(const eng_op_call_t *call);
eng_status_t eng_infer_norm_backward(eng_op_call_t *call);
eng_status_t eng_cpu_rms_norm_backward(const eng_op_call_t *call);
eng_status_t eng_cpu_layer_norm_backward(const eng_op_call_t *call);
eng_status_t eng_infer_cross_entropy_backward(eng_op_call_t *call);
eng_status_t eng_cpu_cross_entropy_backward(const eng_op_call_t *call);
eng_status_t eng_infer_add_rms_norm(eng_op_call_t *call);
eng_status_t eng_cpu_add_rms_norm(const eng_op_call_t *call);
/* E-series: e1.c (e1: in xw, z, W_h, b, h0; out y, h_T, hs. e1_backward: in z, W_h, h0, hs, dy,
 * dh_T; out dxw, dz, dW_h, db, dh0), e23.c (e23: in xw, W_h, W_write, b, h0, tape0; i[0]
 * n_slots, i[1] checkpoint interval; out hs, h_T, tape_T, ckpt. e23_backward: in xw, W_h,
 * W_write, b, h0, hs, ckpt, dhs, dh_T, dtape_T; i[0] checkpoint interval; out dxw, dW_h,
 * dW_write, db, dh0, dtape0) */
eng_status_t eng_infer_e1(eng_op_call_t *call);
eng_status_t eng_cpu_e1(const eng_op_call_t *call);
eng_status_t eng_infer_e1_backward(eng_op_call_t *call);
eng_status_t eng_cpu_e1_backward(const eng_op_call_t *call);
eng_status_t eng_infer_e23(eng_op_call_t *call);
eng_status_t eng_cpu_e23(const eng_op_call_t *call);
eng_status_t eng_infer_e23_backward(eng_op_call_t *call);
eng_status_t eng_cpu_e23_backward(const eng_op_call_t *call);
/* E-series: e88.c (e88: in q, k, v, decay, g, S0; out y, S_T, ckpt -- the first n_out.
 * e88_backward: in q, k, v, decay, g, S0, ckpt, dy, dS_T; out dq, dk, dv, ddecay, dg, dS0.
 * attrs: i[0] ckpt_every (0: eng_e88_default_ckpt_every), flags below) */
#define ENG_ATTR_E88_NO_L2 1  /* e88: q and k are used as given */
#define ENG_ATTR_E88_LINEAR 2 /* e88: no tanh on the state */
eng_status_t eng_infer_e88(eng_op_call_t *call);
eng_status_t eng_cpu_e88(const eng_op_call_t *call);
eng_status_t eng_infer_e88_backward(eng_op_call_t *call);
eng_status_t eng_cpu_e88_backward(const eng_op_call_t *call);
/* opt: scatters (scatter.c: index_add, scatter_add: in base, index, src; i[0] dim) and the
 * optimizer ops (optim.c; inputs and attrs in ops/optim.h) */
eng_status_t eng_infer_index_add(eng_op_call_t *call);
eng_status_t eng_cpu_index_add(const eng_op_call_t *call);
eng_status_t eng_infer_scatter_add(eng_op_call_t *call);
eng_status_t eng_cpu_scatter_add(const eng_op_call_t *call);
eng_status_t eng_infer_adamw(eng_op_call_t *call);
eng_status_t eng_cpu_adamw(const eng_op_call_t *call);
eng_status_t eng_infer_sum_squares(eng_op_call_t *call);
eng_status_t eng_cpu_sum_squares(const eng_op_call_t *call);
eng_status_t eng_infer_scale(eng_op_call_t *call);
eng_status_t eng_cpu_scale(const eng_op_call_t *call);


/* CUDA backend adapters (engine/src/cuda/ops_*.c), present when the build has CUDA. Each family
 * adds its entries to the registry table as CUDA(eng_cuda_*). */
#ifdef ENG_HAVE_CUDA
eng_status_t eng_cuda_unary(const eng_op_call_t *call);
eng_status_t eng_cuda_binary(const eng_op_call_t *call);
eng_status_t eng_cuda_clamp(const eng_op_call_t *call);
eng_status_t eng_cuda_where(const eng_op_call_t *call);
eng_status_t eng_cuda_reduce(const eng_op_call_t *call);
eng_status_t eng_cuda_argmax(const eng_op_call_t *call);
eng_status_t eng_cuda_softmax(const eng_op_call_t *call);
eng_status_t eng_cuda_layer_norm(const eng_op_call_t *call);
eng_status_t eng_cuda_rms_norm(const eng_op_call_t *call);
eng_status_t eng_cuda_cross_entropy(const eng_op_call_t *call);
eng_status_t eng_cuda_matmul(const eng_op_call_t *call);
eng_status_t eng_cuda_linear(const eng_op_call_t *call);
eng_status_t eng_cuda_embedding(const eng_op_call_t *call);
eng_status_t eng_cuda_index_select(const eng_op_call_t *call);
eng_status_t eng_cuda_gather(const eng_op_call_t *call);
eng_status_t eng_cuda_cat(const eng_op_call_t *call);
eng_status_t eng_cuda_copy(const eng_op_call_t *call);
eng_status_t eng_cuda_fill(const eng_op_call_t *call);
eng_status_t eng_cuda_arange(const eng_op_call_t *call);
eng_status_t eng_cuda_eye(const eng_op_call_t *call);
eng_status_t eng_cuda_rand(const eng_op_call_t *call);
eng_status_t eng_cuda_randn(const eng_op_call_t *call);
eng_status_t eng_cuda_randint(const eng_op_call_t *call);
/* E-series: e88 (ops_e88.c) */
eng_status_t eng_cuda_e88(const eng_op_call_t *call);
eng_status_t eng_cuda_e88_backward(const eng_op_call_t *call);
/* backward kernels and add_rms_norm (ops_norm_backward.c) */
eng_status_t eng_cuda_softmax_backward(const eng_op_call_t *call);
eng_status_t eng_cuda_rms_norm_backward(const eng_op_call_t *call);
eng_status_t eng_cuda_layer_norm_backward(const eng_op_call_t *call);
eng_status_t eng_cuda_cross_entropy_backward(const eng_op_call_t *call);
eng_status_t eng_cuda_add_rms_norm(const eng_op_call_t *call);
/* opt: scatters and optimizer ops (ops_scatter.c, ops_optim.c) */
eng_status_t eng_cuda_index_add(const eng_op_call_t *call);
eng_status_t eng_cuda_scatter_add(const eng_op_call_t *call);
eng_status_t eng_cuda_adamw(const eng_op_call_t *call);
eng_status_t eng_cuda_sum_squares(const eng_op_call_t *call);
eng_status_t eng_cuda_scale(const eng_op_call_t *call);
/* E-series: e1, e23 (ops_e1.c, ops_e23.c) */
eng_status_t eng_cuda_e1(const eng_op_call_t *call);
eng_status_t eng_cuda_e1_backward(const eng_op_call_t *call);
eng_status_t eng_cuda_e23(const eng_op_call_t *call);
eng_status_t eng_cuda_e23_backward(const eng_op_call_t *call);
#endif

#endif
