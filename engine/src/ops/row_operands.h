/* Shape/dtype checks shared by the row ops that mix dtypes (the norm backwards, add_rms_norm):
 * one input x [..., d], inputs shaped like x, and parameters [d], each of any floating dtype. */
#ifndef ENG_ROW_OPERANDS_H
#define ENG_ROW_OPERANDS_H

#include "cpu/norm_backward.h"
#include "eng_registry.h"

/* Checks the call's inputs: in[xi] (present) is floating with at least one dim; the present inputs
 * whose bit is set in like_x are floating and shaped like x; every other present input is a
 * floating [d], d the last dim of x. roles[k] names input k in the messages. */
eng_status_t eng_check_row_operands(const eng_op_call_t *call, int xi, unsigned like_x,
                                    const char *const *roles);
/* meta[k] = t's shape and dtype. */
void eng_row_param_meta(eng_op_call_t *call, int k, const eng_tensor_t *t);

/* A contiguous tensor (or NULL) as a kernel operand. */
static inline eng_kcpu_arg_t eng_kcpu_arg(const eng_tensor_t *t) {
  eng_kcpu_arg_t a = {t ? eng_tensor_data(t) : NULL, t ? t->dtype : ENG_F32};
  return a;
}

#endif
