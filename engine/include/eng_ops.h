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

#ifdef __cplusplus
}
#endif
#endif
