/* The tail of a linear layer on the CPU: y[r, c] = act(y[r, c] + bias[c]) in place over a
 * contiguous [rows, cols] result, computed in double and stored once. */
#ifndef ENG_KCPU_BIAS_ACT_H
#define ENG_KCPU_BIAS_ACT_H

#include <stdint.h>

/* act: an eng_act_t (none, relu, gelu with the tanh approximation). bias may be NULL; its
 * elements are bias_stride apart. */
void eng_kcpu_bias_act_f32(float *y, int64_t rows, int64_t cols, const float *bias,
                           int64_t bias_stride, int act);
void eng_kcpu_bias_act_f64(double *y, int64_t rows, int64_t cols, const double *bias,
                           int64_t bias_stride, int act);

#endif
