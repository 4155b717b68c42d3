/* The math ops of the core, as plain C functions. Each one validates its inputs, runs the op on
 * the inputs' device through the op registry (eng_registry.h) and hands out a new tensor.
 * Broadcasting follows NumPy/PyTorch rules. Mixed dtypes are promoted (eng_dtype_promote).
 * Dims may be negative (counted from the end). Index-valued tensors are 0-based and integer. */
#ifndef ENG_OPS_H
#define ENG_OPS_H

#include "eng_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise, unary (floating dtypes; neg/abs/relu also take integers) ---- */
typedef enum {
  ENG_UNARY_NEG, ENG_UNARY_ABS, ENG_UNARY_EXP, ENG_UNARY_LOG, ENG_UNARY_SQRT, ENG_UNARY_RSQRT,
  ENG_UNARY_TANH, ENG_UNARY_SIGMOID, ENG_UNARY_SILU, ENG_UNARY_GELU, ENG_UNARY_RELU,
  ENG_UNARY_SOFTPLUS,
  ENG_UNARY_COUNT
} eng_unary_op_t;
eng_status_t eng_op_unary(eng_unary_op_t op, eng_tensor_t *x, eng_tensor_t **out);
const char *eng_unary_name(eng_unary_op_t op);
/* gelu: the exact erf form. softplus: log(1 + exp(x)), linear above x > 20. */

/* ---- elementwise, binary with broadcasting ---- */
typedef enum {
  ENG_BINARY_ADD, ENG_BINARY_SUB, ENG_BINARY_MUL, ENG_BINARY_DIV, ENG_BINARY_POW,
  ENG_BINARY_MAXIMUM, ENG_BINARY_MINIMUM,
  /* comparisons give u8 (0/1) */
  ENG_BINARY_EQ, ENG_BINARY_NE, ENG_BINARY_LT, ENG_BINARY_LE, ENG_BINARY_GT, ENG_BINARY_GE,
  ENG_BINARY_COUNT
} eng_binary_op_t;
/* div of two integer tensors gives f32 (true division). */
eng_status_t eng_op_binary(eng_binary_op_t op, eng_tensor_t *a, eng_tensor_t *b, eng_tensor_t **out);
const char *eng_binary_name(eng_binary_op_t op);

/* clamp(x, lo, hi); pass has_lo/has_hi = 0 to leave a side open. */
eng_status_t eng_op_clamp(eng_tensor_t *x, int has_lo, double lo, int has_hi, double hi,
                          eng_tensor_t **out);
/* where(cond, a, b): cond any dtype (nonzero = true), broadcast of all three. */
eng_status_t eng_op_where(eng_tensor_t *cond, eng_tensor_t *a, eng_tensor_t *b, eng_tensor_t **out);

/* ---- reductions over a set of dims (ndims == 0 means all dims) ---- */
typedef enum {
  ENG_REDUCE_SUM, ENG_REDUCE_MEAN, ENG_REDUCE_MAX, ENG_REDUCE_MIN, ENG_REDUCE_VAR, ENG_REDUCE_STD,
  ENG_REDUCE_COUNT
} eng_reduce_op_t;
/* sum of integers gives i64; mean/var/std need a floating dtype. var/std use `correction`
 * (1 = unbiased, the default in the binding). */
eng_status_t eng_op_reduce(eng_reduce_op_t op, eng_tensor_t *x, const int64_t *dims, int ndims,
                           int keepdim, int correction, eng_tensor_t **out);
const char *eng_reduce_name(eng_reduce_op_t op);
/* argmax over one dim (or the flattened tensor when flatten != 0), i64 result. */
eng_status_t eng_op_argmax(eng_tensor_t *x, int64_t dim, int flatten, int keepdim, eng_tensor_t **out);

/* ---- normalisation and friends ---- */
eng_status_t eng_op_softmax(eng_tensor_t *x, int64_t dim, eng_tensor_t **out);
eng_status_t eng_op_log_softmax(eng_tensor_t *x, int64_t dim, eng_tensor_t **out);
/* Over the last dim; weight (and bias) have shape [last dim] and may be NULL. */
eng_status_t eng_op_layer_norm(eng_tensor_t *x, eng_tensor_t *weight, eng_tensor_t *bias, double eps,
                               eng_tensor_t **out);
eng_status_t eng_op_rms_norm(eng_tensor_t *x, eng_tensor_t *weight, double eps, eng_tensor_t **out);

/* ---- matmul: torch.matmul semantics (1-D, 2-D, batched with broadcast batch dims).
 * f32/f64 through BLAS; f16/bf16 computed in f32 and rounded once. ---- */
eng_status_t eng_op_matmul(eng_tensor_t *a, eng_tensor_t *b, eng_tensor_t **out);

/* ---- linear: y = act(x @ W^T + b), x [..., K], W [N, K], b [N] (or NULL) -> [..., N].
 * Mixed dtypes are promoted to one floating dtype. ENG_ACT_GELU_TANH is the tanh approximation
 * 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) (what cuBLASLt's GELU epilogue computes), not the
 * exact erf form of ENG_UNARY_GELU. ---- */
typedef enum { ENG_ACT_NONE = 0, ENG_ACT_RELU, ENG_ACT_GELU_TANH, ENG_ACT_COUNT } eng_act_t;
eng_status_t eng_op_linear(eng_tensor_t *x, eng_tensor_t *w, eng_tensor_t *b, int act,
                           eng_tensor_t **out);

/* ---- indexing ---- */
/* weight [V, D...], ids integer any shape -> [ids..., D...]; ids out of [0,V) is ENG_ERR_INDEX. */
eng_status_t eng_op_embedding(eng_tensor_t *ids, eng_tensor_t *weight, eng_tensor_t **out);
/* Picks entries along dim by a 1-D integer index. */
eng_status_t eng_op_index_select(eng_tensor_t *x, int64_t dim, eng_tensor_t *index, eng_tensor_t **out);
/* torch.gather: out[i][j][k] = x[index[i][j][k]][j][k] for dim 0, etc. */
eng_status_t eng_op_gather(eng_tensor_t *x, int64_t dim, eng_tensor_t *index, eng_tensor_t **out);
/* On CUDA the indices are bounds-checked too (a small reduction and one 8-byte read back), except
 * while a CUDA graph is being captured, when nothing may synchronise: then an out-of-range index
 * gives NaN (float dtypes) or 0 (integer dtypes) in its output entries instead of an error. */

/* ---- losses ---- */
/* logits [..., C], targets integer [...]; mean over non-ignored targets (f32/f64 scalar result).
 * A target outside [0,C) that is not ignore_index is ENG_ERR_INDEX. On CUDA the check costs one
 * 16-byte read back; while a CUDA graph is being captured nothing may synchronise, so the check is
 * skipped and such a target makes the loss NaN instead. */
eng_status_t eng_op_cross_entropy(eng_tensor_t *logits, eng_tensor_t *targets, int64_t ignore_index,
                                  eng_tensor_t **out);

/* ---- joining ---- */
eng_status_t eng_op_cat(eng_tensor_t *const *ts, int n, int64_t dim, eng_tensor_t **out);
eng_status_t eng_op_stack(eng_tensor_t *const *ts, int n, int64_t dim, eng_tensor_t **out);

/* ---- backward kernels of the norms, softmax and cross-entropy, and the fused residual add +
 * rms_norm forward. Fused so that autograd runs one kernel where a chain of small ops would do.
 * The norm ops take operands of mixed floating dtypes (a bf16 gy against an f32 x): gx has x's
 * dtype, gw w's, gb b's. Parameter gradients sum over all rows in a fixed order (reproducible;
 * f32 accumulation on CUDA, f64 for f64). ---- */
/* y is softmax's (log_softmax's when log != 0) OUTPUT along dim; gy and y share shape and dtype.
 * softmax: gx = y * (gy - sum_dim(gy * y)); log_softmax: gx = gy - exp(y) * sum_dim(gy). */
eng_status_t eng_op_softmax_backward(eng_tensor_t *gy, eng_tensor_t *y, int64_t dim, int log,
                                     eng_tensor_t **gx);
/* Backward of rms_norm(x, w, eps) over the last dim. w may be NULL: then no gw (gw may be NULL
 * too, and is set to NULL). */
eng_status_t eng_op_rms_norm_backward(eng_tensor_t *gy, eng_tensor_t *x, eng_tensor_t *w, double eps,
                                      eng_tensor_t **gx, eng_tensor_t **gw);
/* Backward of layer_norm(x, w, b, eps). w and b may be NULL: then no gw / gb (set to NULL). */
eng_status_t eng_op_layer_norm_backward(eng_tensor_t *gy, eng_tensor_t *x, eng_tensor_t *w,
                                        eng_tensor_t *b, double eps, eng_tensor_t **gx,
                                        eng_tensor_t **gw, eng_tensor_t **gb);
/* Backward of cross_entropy(logits, targets, ignore_index) scaled by gloss, a one-element floating
 * tensor on the logits' device that is never read back to the host (CUDA graphs can capture it):
 * glogits = (softmax(logits) - onehot(target)) * gloss / n_valid, 0 on ignored rows, in the
 * logits' dtype. A target out of range is ENG_ERR_INDEX on the CPU; on CUDA (which does not
 * synchronise to check; the forward has reported it) its row is NaN. */
eng_status_t eng_op_cross_entropy_backward(eng_tensor_t *logits, eng_tensor_t *targets,
                                           eng_tensor_t *gloss, int64_t ignore_index,
                                           eng_tensor_t **glogits);
/* residual_out = residual + x, stored in f32 (f64 if x or residual is f64); residual may be NULL
 * (residual_out = x widened) and is f32, f64 or x's dtype. y = rms_norm(residual_out, w, eps) in
 * x's dtype; w ([last dim], any floating dtype) may be NULL. residual_out may be NULL (dropped). */
eng_status_t eng_op_add_rms_norm(eng_tensor_t *x, eng_tensor_t *residual, eng_tensor_t *w,
                                 double eps, eng_tensor_t **y, eng_tensor_t **residual_out);

/* ---- E-series recurrences E1 and E23 (batch-first; values f64/f32/f16/bf16, all inputs of one
 * dtype; state and accumulation f32 on CUDA, f64 on the CPU). Optional inputs may be NULL
 * (zeros); unwanted outputs may be passed as NULL pointers. The backward ops return every input
 * gradient in the inputs' dtype. ---- */
/* E1, the gated Elman cell: h_t = tanh(xw_t + W_h h_{t-1} + b), y_t = h_t * silu(z_t).
 * xw (= x W_x^T, the caller's GEMM), z, y, hs [B,T,d]; W_h [d,d]; b [d]; h0, h_T [B,d].
 * hs (every h_t) is what e1_backward needs. */
eng_status_t eng_op_e1(eng_tensor_t *xw, eng_tensor_t *z, eng_tensor_t *W_h, eng_tensor_t *b,
                       eng_tensor_t *h0, eng_tensor_t **y, eng_tensor_t **h_T, eng_tensor_t **hs);
/* Gradients of E1 given dy [B,T,d] and dh_T [B,d] (NULL: zero): dxw, dz [B,T,d], dW_h [d,d],
 * db [d], dh0 [B,d] (given even when h0 is NULL). */
eng_status_t eng_op_e1_backward(eng_tensor_t *z, eng_tensor_t *W_h, eng_tensor_t *h0,
                                eng_tensor_t *hs, eng_tensor_t *dy, eng_tensor_t *dh_T,
                                eng_tensor_t **dxw, eng_tensor_t **dz, eng_tensor_t **dW_h,
                                eng_tensor_t **db, eng_tensor_t **dh0);
/* E23, the dual-memory cell: a tape H [N,d] (N = n_slots) and h [d] per batch row, scale =
 * 1/sqrt(d): r = softmax(scale H h_{t-1}), h_t = tanh(W_h h_{t-1} + xw_t + H^T r + b),
 * w = W_write h_t, a = softmax(scale H h_t), then H[i,:] <- (1 - a_i) H[i,:] + a_i w.
 * xw, hs [B,T,d]; W_h, W_write [d,d]; b [d]; h0, h_T [B,d]; tape0, tape_T [B,N,d]. n_slots may
 * be 0 when tape0 gives it. ckpt [B, W] (f32; f64 for f64 values; W = ceil(T/C)*N*d +
 * T*(2N + d), eng_e23_ckpt_len in kernels/cpu/e23.h) holds per batch row the tape before steps
 * 0, C, 2C, ... (C = ckpt_every >= 1; [N,d] each), then a [T][N], r [T][N] and w [T][d] of every
 * step: with hs, all that e23_backward needs (it replays each segment from its checkpoint instead
 * of keeping the tape history; the trace spares the GPU recomputing the weights). */
eng_status_t eng_op_e23(eng_tensor_t *xw, eng_tensor_t *W_h, eng_tensor_t *W_write,
                        eng_tensor_t *b, eng_tensor_t *h0, eng_tensor_t *tape0, int64_t n_slots,
                        int64_t ckpt_every, eng_tensor_t **hs, eng_tensor_t **h_T,
                        eng_tensor_t **tape_T, eng_tensor_t **ckpt);
/* Gradients of E23 given dhs [B,T,d], dh_T [B,d] and dtape_T [B,N,d] (the last two NULL: zero),
 * from the forward's inputs, hs and ckpt (same ckpt_every; N is the one that ckpt's W fits):
 * dxw [B,T,d], dW_h, dW_write [d,d], db [d], dh0 [B,d], dtape0 [B,N,d]. */
eng_status_t eng_op_e23_backward(eng_tensor_t *xw, eng_tensor_t *W_h, eng_tensor_t *W_write,
                                 eng_tensor_t *b, eng_tensor_t *h0, eng_tensor_t *hs,
                                 eng_tensor_t *ckpt, eng_tensor_t *dhs, eng_tensor_t *dh_T,
                                 eng_tensor_t *dtape_T, int64_t ckpt_every, eng_tensor_t **dxw,
                                 eng_tensor_t **dW_h, eng_tensor_t **dW_write, eng_tensor_t **db,
                                 eng_tensor_t **dh0, eng_tensor_t **dtape0);

/* ---- E-series: e88 ----
 * E88, the nonlinear matrix-state delta rule, per batch b and head h with state S [n,v] (from S0,
 * or zero): k^ = k_t/(|k_t| + 1e-6), q^ likewise (l2; else k_t, q_t as they are);
 * delta = v_t - S^T k^; S <- tanh(decay_t S + k^ delta^T) (linear_state: no tanh);
 * o_t = S^T q^ (the new S); y_t = o_t * silu(g_t) (g NULL: o_t).
 * q, k [B,T,H,n]; v, g, y [B,T,H,v]; decay [B,T,H]; one floating dtype for all of them.
 * S0, S_T [B,H,n,v] in the state dtype (f64 for f64 values, else f32).
 * ckpt [B,H,W] (state dtype) is what e88_backward needs, per (b, h): the state before steps 0, C,
 * 2C, ... (C = ckpt_every; ceil(T/C) of n*v each), then delta [T][v] and o [T][v] of every step
 * (W = ceil(T/C)*n*v + 2*T*v, eng_e88_ckpt_len in kernels/cpu/e88.h). e88_backward recomputes
 * each segment from its checkpoint with the saved delta. opts NULL: l2 on, tanh, the default C.
 * S_T and ckpt may be NULL when not wanted (no ckpt: none is written). */
typedef struct {
  int l2;           /* normalize q and k (default 1) */
  int linear_state; /* no tanh on the state (default 0) */
  int ckpt_every;   /* checkpoint interval C >= 1; 0: the default, 8 at n = 32, else 16 */
} eng_e88_opts_t;
eng_status_t eng_op_e88(eng_tensor_t *q, eng_tensor_t *k, eng_tensor_t *v, eng_tensor_t *decay,
                        eng_tensor_t *g, eng_tensor_t *S0, const eng_e88_opts_t *opts,
                        eng_tensor_t **y, eng_tensor_t **S_T, eng_tensor_t **ckpt);
/* Gradients of e88 given dy [B,T,H,v] and dS_T [B,H,n,v] (NULL: zero), from the forward's inputs
 * and ckpt (same opts): dq, dk, dv, ddecay, dg in the values' dtype, dS0 in the state dtype.
 * dg is NULL when g is, dS0 when S0 is (S0 itself is not read: ckpt holds it). */
typedef struct {
  eng_tensor_t *dq, *dk, *dv, *ddecay, *dg, *dS0;
} eng_e88_grads_t;
eng_status_t eng_op_e88_backward(eng_tensor_t *q, eng_tensor_t *k, eng_tensor_t *v,
                                 eng_tensor_t *decay, eng_tensor_t *g, eng_tensor_t *S0,
                                 eng_tensor_t *ckpt, eng_tensor_t *dy, eng_tensor_t *dS_T,
                                 const eng_e88_opts_t *opts, eng_e88_grads_t *out);


/* ---- scatters (the gradients of indexing) and optimizer steps (the "opt" group) ---- */
/* torch.index_add, out of place: out = base, then out.select(dim, index[i]) += src.select(dim, i)
 * for each i of the 1-D integer index (i32, i64 or u8); repeated indices accumulate. base and src
 * share one dtype (f64, f32, f16, bf16, i32, i64); src matches base off dim and has numel(index)
 * entries along it. f16/bf16 accumulate in an f32 copy of base, rounded once at the end.
 * CPU: deterministic (each element adds in index order). CUDA: one atomicAdd per src element, so
 * float sums may differ in the last bits from run to run (integer sums are exact).
 * Out-of-range indices: ENG_ERR_INDEX, on CUDA as for gather (below), except that during graph
 * capture such entries are skipped (their src values dropped). The backward of embedding
 * (base = zeros [V, D], dim 0, index = the flattened ids, src = the gradient as [N, D]) and of
 * index_select. */
eng_status_t eng_op_index_add(eng_tensor_t *base, int64_t dim, eng_tensor_t *index,
                              eng_tensor_t *src, eng_tensor_t **out);
/* torch.scatter_add, out of place: out = base, then out[index[i][j]][j] += src[i][j] for dim 0
 * (and likewise for other dims and ranks). index is integer with base's number of dims, no larger
 * than src in any dim and no larger than base off dim. Dtypes, accumulation, determinism and
 * out-of-range indices as index_add. The backward of gather. */
eng_status_t eng_op_scatter_add(eng_tensor_t *base, int64_t dim, eng_tensor_t *index,
                                eng_tensor_t *src, eng_tensor_t **out);

/* AdamW's hyperparameters (torch.optim.AdamW without amsgrad). step is the 1-based number of
 * this update: the bias corrections are 1 - beta1^step and 1 - beta2^step. */
typedef struct {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;
} eng_adamw_hparams_t;
/* One AdamW step on n parameters, in place. Per element, with g the grad:
 *   p *= 1 - lr*weight_decay                       (decoupled weight decay)
 *   m = beta1*m + (1-beta1)*g;  v = beta2*v + (1-beta2)*g^2
 *   p -= lr/(1-beta1^step) * m / (sqrt(v)/sqrt(1-beta2^step) + eps)
 * params f64/f32/f16/bf16, contiguous, all on one device; grads[i] the shape of params[i], its
 * dtype or f32; exp_avg/exp_avg_sq (m, v) f32, f64 for f64 params. The math is in f32 (f64 for
 * f64 params); f16/bf16 params are updated in f32 and rounded once (to nearest even).
 * lr >= 0, betas in [0, 1), eps > 0, weight_decay >= 0, step >= 1. On CUDA one kernel launch
 * for up to 160 tensors (one more per further 160). Bumps the version of every param and moment.
 * Autograd does not record it: run it with grad mode off. */
eng_status_t eng_op_adamw_(eng_tensor_t *const *params, eng_tensor_t *const *grads,
                           eng_tensor_t *const *exp_avg, eng_tensor_t *const *exp_avg_sq, int n,
                           const eng_adamw_hparams_t *h);
/* sum over the n >= 1 tensors of sum(x^2), as a 0-d tensor: f32, or f64 when any input is f64.
 * Floating inputs of any shape and layout, on one device. Accumulated in f64 over fixed chunks,
 * then the chunk sums in order: the same result on every run (CUDA: one launch for up to 160
 * tensors, then one block adds the chunk sums). For clip_grad_norm. */
eng_status_t eng_op_sum_squares(eng_tensor_t *const *ts, int n, eng_tensor_t **out);
/* Multiplies each of the n tensors in place by scale, a one-element floating tensor on their
 * device that the kernel reads there (no host sync: clipping can compute
 * min(1, max_norm / (norm + 1e-6)) with ops and pass it here). Tensors floating and contiguous,
 * not sharing memory with scale; products in f32 ((float)scale), f64 for f64 tensors, rounded
 * once. Bumps the version of every tensor. */
eng_status_t eng_op_scale_(eng_tensor_t *const *ts, int n, eng_tensor_t *scale);

#ifdef __cplusplus
}
#endif
#endif
