/* Matrix products on the GPU through cuBLASLt, for the matmul and linear adapters.
 *
 * Operands are described row-major, as the engine stores them; blaslt.c maps them onto cuBLASLt's
 * column-major API (C^T = B^T A^T: the operands swap places). Each device gets one cuBLASLt handle,
 * created on first use. The descriptors, layouts and heuristic choice of algorithm are cached per
 * problem (dtype, sizes, layouts, batch strides, pointer alignments, epilogue), so that repeating a
 * product (the per-step GEMM) costs a table lookup and the cublasLtMatmul call. A big product's plan
 * is autotuned once, on its first run outside graph capture: the heuristic's top candidates are
 * timed on the call's stream (one synchronisation) and the fastest is kept. Workspace comes from
 * the caching allocator on the call's stream, so concurrent streams and graph capture are safe.
 *
 * Precision: f32 with CUBLAS_COMPUTE_32F (no TF32); f16/bf16 in and out with f32 accumulation and
 * f32 scale; f64 with CUBLAS_COMPUTE_64F. */
#ifndef ENG_CUDA_BLASLT_H
#define ENG_CUDA_BLASLT_H

#include "eng_cuda.h"

/* One operand: a matrix [rows, cols] of the product. Stored as is (trans == 0: element (i, j) at
 * data + i*ld + j) or as its transpose (trans == 1: element (i, j) at data + j*ld + i). Batch entry
 * t starts bstride elements after entry t-1 (0: one matrix shared by the whole batch). */
typedef struct {
  const void *data;
  int trans;
  int64_t ld;
  int64_t bstride;
} eng_blaslt_operand_t;

typedef struct {
  eng_dtype_t dtype;           /* of A, B, C and bias */
  int64_t m, n, k, batch;      /* all >= 1 (the callers handle empty products) */
  eng_blaslt_operand_t a, b;   /* A is m x k, B is k x n; ld >= the stored matrix's cols */
  void *c;                     /* contiguous [batch, m, n] */
  const void *bias;            /* contiguous [n], added to every row; NULL for none */
  int act;                     /* eng_act_t, applied after the bias */
  int negate;                  /* the product enters negated (alpha = -1) */
  int accumulate;              /* C's values are added (beta = 1; no bias, no act) */
  int c_f32;                   /* C in f32 whatever the operands' dtype (sums rounded later) */
} eng_blaslt_gemm_t;

/* Runs C = act(A @ B + bias), or C = C +- A @ B, on `stream` of `device` (no synchronisation). ENG_ERR_UNSUPPORTED when
 * cuBLASLt has no algorithm for the problem (an epilogue it lacks for the dtype, say): callers may
 * then fall back. Other failures are ENG_ERR_DEVICE / ENG_ERR_OOM naming the cuBLASLt status. */
eng_status_t eng_blaslt_gemm(int device, eng_stream_t stream, const eng_blaslt_gemm_t *g);

#endif
