/* Walking several N-d strided operands of one shape in step. Size-1 dims are dropped and dims
 * that are contiguous in every operand merged, so the work becomes runs along one inner dim that
 * a tight loop handles (a contiguous same-shape op is a single run; a bias broadcast over rows is
 * one run per row with the bias at stride 1). Shapes and strides are in elements. */
#ifndef ENG_KCPU_ND_ITER_H
#define ENG_KCPU_ND_ITER_H

#include <stddef.h>
#include <stdint.h>

#include "eng_base.h"

#define ENG_KCPU_ND_MAX_OPS 4
/* Element counts from this size on are split over the OpenMP threads. */
#define ENG_KCPU_PARALLEL_MIN 32768

typedef struct {
  int ndim;
  int nops;
  int64_t size[ENG_MAX_DIMS];
  int64_t stride[ENG_KCPU_ND_MAX_OPS][ENG_MAX_DIMS];
  char *base[ENG_KCPU_ND_MAX_OPS];
  size_t elsize[ENG_KCPU_ND_MAX_OPS];
} eng_kcpu_nd_t;

/* One run of n elements: p[k] points at operand k's first element of the run and s[k] is its
 * stride along the run (0 for an operand broadcast along it). */
typedef void (*eng_kcpu_run_fn)(void *ctx, int64_t n, char *const *p, const int64_t *s);

/* Starts an iteration over `nops` operands of shape size[0..ndim-1]. */
void eng_kcpu_nd_init(eng_kcpu_nd_t *it, int ndim, const int64_t *size, int nops);
/* Operand k: its element 0, element size, and ndim strides (0 where it is broadcast). */
void eng_kcpu_nd_operand(eng_kcpu_nd_t *it, int k, void *base, size_t elsize,
                         const int64_t *stride);
/* Calls fn over all elements, in runs; threads share the work (and ctx) when it is large. */
void eng_kcpu_nd_run(const eng_kcpu_nd_t *it, eng_kcpu_run_fn fn, void *ctx);

#endif
