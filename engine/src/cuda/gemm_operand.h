/* How a strided tensor becomes an operand of eng_blaslt_gemm: read in place when cuBLASLt can
 * (rows or columns contiguous with a valid leading dim, batch dims that collapse into one stride),
 * else through a contiguous copy made by the copy op. */
#ifndef ENG_CUDA_GEMM_OPERAND_H
#define ENG_CUDA_GEMM_OPERAND_H

#include "cuda/blaslt.h"
#include "eng_tensor.h"

/* t as the left (is_b = 0: [..., m, k], or a 1-D row [k]) or right (is_b = 1: [..., k, n], or a
 * 1-D column [k]) operand of a product whose batch dims are bshape[0..nbatch-1] (t's own batch
 * dims broadcast into them, right-aligned). Fills op; when a copy was needed, *hold receives it and
 * op points into it: the caller releases *hold once the product is enqueued (the caching
 * allocator reuses the memory only in stream order). */
eng_status_t eng_gemm_operand(eng_tensor_t *t, int is_b, int nbatch, const int64_t *bshape,
                              eng_blaslt_operand_t *op, eng_tensor_t **hold);

#endif
