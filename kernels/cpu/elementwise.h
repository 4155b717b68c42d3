/* CPU elementwise kernels over strided N-d operands (see nd_iter.h). Operand 0 is always the
 * contiguous output. f32/f64 compute in their own precision; f16/bf16 are widened to float in
 * blocks, computed as f32 and rounded once on store; integer arithmetic is exact (wrapping). */
#ifndef ENG_KCPU_ELEMENTWISE_H
#define ENG_KCPU_ELEMENTWISE_H

#include "cpu/nd_iter.h"
#include "eng_ops.h"

/* Operands: y, x, both of dtype dt. Integer dtypes take NEG/ABS/RELU only (u8: ABS/RELU). */
void eng_kcpu_unary(eng_unary_op_t op, eng_dtype_t dt, const eng_kcpu_nd_t *nd);

/* Operands: out, a, b; a and b of dtype dt; out of dt, or u8 for the comparisons.
 * Integer dtypes take every op but DIV. Returns nonzero when an integer POW met a negative
 * exponent (that element is left 0). */
int eng_kcpu_binary(eng_binary_op_t op, eng_dtype_t dt, const eng_kcpu_nd_t *nd);

/* Operands: y, x of dtype dt. y = min(max(x, lo), hi) with an open side where has_* is 0.
 * NaN stays NaN. Integer dtypes clamp to the integers inside [lo, hi] (ceil(lo), floor(hi)),
 * saturated to the dtype's range. lo and hi must not be NaN. */
void eng_kcpu_clamp(eng_dtype_t dt, int has_lo, double lo, int has_hi, double hi,
                    const eng_kcpu_nd_t *nd);

/* Operands: out, cond, a, b. out = cond != 0 ? a : b, moved as raw elements of out's size (a, b
 * and out share a dtype); cond of any dtype, a NaN counting as true. */
void eng_kcpu_where(eng_dtype_t cond_dt, const eng_kcpu_nd_t *nd);

#endif
