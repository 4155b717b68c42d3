/* What the CPU and CUDA adapters of the optimizer ops share (engine/src/ops/optim.c,
 * engine/src/cuda/ops_optim.c).
 *
 * Inputs and attrs:
 *   adamw_:      in = params[0..n-1], grads[0..n-1], exp_avg[0..n-1], exp_avg_sq[0..n-1] (4n);
 *                f[0] lr, f[1] beta1, f[2] beta2, f[3] eps, f[4] weight_decay, i[0] step
 *   sum_squares: in = the n tensors
 *   scale_:      in = the n tensors, then the scale (n + 1) */
#ifndef ENG_OPS_OPTIM_H
#define ENG_OPS_OPTIM_H

#include "cpu/optim.h"
#include "eng_registry.h"

/* The per-step coefficients of an adamw_ call's attrs. */
void eng_adamw_coefs(const eng_op_attrs_t *a, eng_k_adamw_t *h);

#endif
