/* CPU matrix products through OpenBLAS: C[batch] = A[batch] @ B[batch] on strided operands.
 * Operands BLAS can read as they are (row-major or transposed, leading dim = the other stride)
 * go to gemm without a copy; other layouts are packed into a contiguous scratch first. */
#ifndef ENG_KCPU_MATMUL_H
#define ENG_KCPU_MATMUL_H

#include <stdint.h>

#include "eng_base.h"

/* One operand: element (batch b, row i, col j) at base + sum_d b_d * bstride[d] + i*rs + j*cs. */
typedef struct {
  int64_t rs, cs;
  int64_t bstride[ENG_MAX_DIMS]; /* 0 where the operand is broadcast over that batch dim */
} eng_kcpu_operand_t;

typedef struct {
  int64_t m, n, k;               /* A is m x k, B is k x n */
  int nbatch;                    /* batch dims, each of size bshape[d] */
  int64_t bshape[ENG_MAX_DIMS];
  eng_kcpu_operand_t a, b;       /* C is contiguous [batch..., m, n] */
} eng_kcpu_matmul_t;

enum {
  ENG_KCPU_MATMUL_OK = 0,
  ENG_KCPU_MATMUL_NOMEM = -1,    /* packing scratch could not be allocated */
  ENG_KCPU_MATMUL_TOO_BIG = -2   /* a size does not fit BLAS's 32-bit ints */
};

int eng_kcpu_matmul_f32(const eng_kcpu_matmul_t *p, const float *a, const float *b, float *c);
int eng_kcpu_matmul_f64(const eng_kcpu_matmul_t *p, const double *a, const double *b, double *c);

#endif
