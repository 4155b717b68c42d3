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
#endif

#endif
