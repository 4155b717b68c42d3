/* What the E-series op files (e1.c, e23.c and their CUDA adapters) share: argument checks that
 * name the op, the role and the shapes, f64 staging for the CPU reference, and running a call
 * with several outputs. */
#ifndef ENG_OPS_E_SERIES_H
#define ENG_OPS_E_SERIES_H

#include "eng_registry.h"

/* ENG_ERR_SHAPE/DTYPE unless t is a dt tensor of exactly `shape` (nd dims), e.g.
 * "e1: W_h has shape [3,4] but must be [4,4] (d = 4)". */
eng_status_t eng_es_need(const char *op, const char *role, const eng_tensor_t *t, eng_dtype_t dt,
                         int nd, const int64_t *shape);
/* The [B,T,d] sizes of the sequence input x, checked (a floating dtype, B, T, d >= 1). */
eng_status_t eng_es_seq(const char *op, const char *role, const eng_tensor_t *x, int64_t *B,
                        int64_t *T, int64_t *d);
/* meta[k] = shape (nd dims) of dtype dt. */
void eng_es_meta(eng_op_call_t *call, int k, eng_dtype_t dt, int nd, const int64_t *shape);
/* The dtype recurrent state is kept in: f64 for f64 values, else f32. */
eng_dtype_t eng_es_state_dtype(eng_dtype_t values);
/* *out = t as a contiguous f64 tensor on the CPU (NULL stays NULL). */
eng_status_t eng_es_f64(eng_tensor_t *t, eng_tensor_t **out);
/* Stores the doubles v (out's element count, row-major) into out, rounding to its dtype. */
eng_status_t eng_es_store(eng_tensor_t *out, double *v);
/* The CPU adapters' staging: c[k] = input k as contiguous f64 (absent ones NULL; all released on
 * failure); eng_es_data gives a staged input's doubles (or NULL); eng_es_alloc makes one double
 * buffer per output; eng_es_finish stores them into the outputs (rounding to their dtypes), frees
 * them and releases the staged inputs; eng_es_release releases the staged inputs alone. */
eng_status_t eng_es_stage(const eng_op_call_t *call, eng_tensor_t **c);
const double *eng_es_data(const eng_tensor_t *t);
eng_status_t eng_es_alloc(const eng_op_call_t *call, double **buf);
eng_status_t eng_es_finish(const eng_op_call_t *call, eng_tensor_t **c, double **buf);
void eng_es_release(const eng_op_call_t *call, eng_tensor_t **c);
/* Dispatches call and hands out its outputs: outs[k] (when not NULL) takes out[k]; the others
 * are released. */
eng_status_t eng_es_run(eng_op_call_t *call, eng_tensor_t **const *outs, int n);

#ifdef ENG_HAVE_CUDA
/* The weight gradients of the CUDA adapters (ops_e1.c), as registry ops into preset outputs:
 * dW [d,d] = sum over (b,t) of g[b,t,:]^T x[b,t,:] (one GEMM; g, x contiguous [B,T,d]) and
 * db [d] = the sum of g over (b,t). */
eng_status_t eng_es_cuda_weight_grad(eng_tensor_t *g, eng_tensor_t *x, eng_tensor_t *dW);
eng_status_t eng_es_cuda_bias_grad(eng_tensor_t *g, eng_tensor_t *db);
/* dW [d,d] = sum over (b,t) of g[b,t,:]^T h_{t-1}[b,:], h_{t-1} the row of hs a step back (h0,
 * or zero, at t = 0), for g, hs contiguous [B,T,d] and h0 contiguous [B,d] or NULL, with no copy
 * of hs shifted (ops_e1.c). */
eng_status_t eng_es_cuda_prev_weight_grad(const eng_tensor_t *g, const eng_tensor_t *hs,
                                          const eng_tensor_t *h0, eng_tensor_t *dW);
#endif

#endif
