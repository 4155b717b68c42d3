/* CPU kernels of the optimizer ops: the AdamW update, sums of squares and in-place scaling of
 * dense tensors. Each call handles one tensor; the adapters loop over the list. */
#ifndef ENG_KCPU_OPTIM_H
#define ENG_KCPU_OPTIM_H

#include <stdint.h>

#include "eng_base.h"

/* The coefficients of one AdamW step, computed once in double from the hyperparameters (the
 * CUDA kernel takes the same struct): per element, in the math type A (f64 for f64 params, else
 * f32, the coefficients cast to A):
 *   m = beta1*m + omb1*g;  v = beta2*v + omb2*g*g;
 *   p = p*decay - step_size * m / (sqrt(v)/bc2_sqrt + eps)
 * with decay = 1 - lr*wd, omb = 1 - beta, step_size = lr/(1 - beta1^step),
 * bc2_sqrt = sqrt(1 - beta2^step). */
typedef struct {
  double beta1, beta2, omb1, omb2, decay, step_size, bc2_sqrt, eps;
} eng_k_adamw_t;

/* One dense tensor of n elements: p of pdt (f64/f32/f16/bf16), g of gdt (pdt or f32), m and v of
 * the math type (double for f64 params, else float). Returns -1 for a dtype pair it does not
 * take. */
int eng_kcpu_adamw(void *p, eng_dtype_t pdt, const void *g, eng_dtype_t gdt, void *m, void *v,
                   int64_t n, const eng_k_adamw_t *h);

/* Elements per partial sum: sums of squares add fixed chunks in f64 and then the chunk sums in
 * order, so the result does not depend on the thread count (the CUDA kernel chunks alike). */
#define ENG_K_SUMSQ_CHUNK 8192
/* sum(x^2) over n dense elements of a floating dtype, in double. */
double eng_kcpu_sum_squares(const void *x, eng_dtype_t dt, int64_t n);

/* x *= s over n dense elements of a floating dtype: in f32 with (float)s, f64 for f64, rounded
 * once. Returns -1 for a non-floating dtype. */
int eng_kcpu_scale(void *x, eng_dtype_t dt, int64_t n, double s);

#endif
