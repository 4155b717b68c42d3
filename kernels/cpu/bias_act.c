/* Bias and activation after a matrix product, in double. */
#include "cpu/bias_act.h"

#include <math.h>

#include "eng_ops.h"

/* Below this many elements a thread team costs more than it saves. */
#define PARALLEL_MIN 32768

static double activate(double v, int act) {
  switch (act) {
  case ENG_ACT_RELU: return v < 0 ? 0.0 : v; /* keeps NaN, like the relu op */
  case ENG_ACT_GELU_TANH: {
    const double c = 0.7978845608028654; /* sqrt(2 / pi) */
    return 0.5 * v * (1.0 + tanh(c * (v + 0.044715 * v * v * v)));
  }
  default: return v;
  }
}

#define BIAS_ACT(T)                                                                   \
  do {                                                                                \
    _Pragma("omp parallel for schedule(static) if (rows * cols >= PARALLEL_MIN)")     \
    for (int64_t r = 0; r < rows; r++) {                                              \
      T *row = y + r * cols;                                                          \
      for (int64_t c = 0; c < cols; c++) {                                            \
        double v = (double)row[c] + (bias ? (double)bias[c * bias_stride] : 0.0);     \
        row[c] = (T)activate(v, act);                                                 \
      }                                                                               \
    }                                                                                 \
  } while (0)

void eng_kcpu_bias_act_f32(float *y, int64_t rows, int64_t cols, const float *bias,
                           int64_t bias_stride, int act) {
  BIAS_ACT(float);
}

void eng_kcpu_bias_act_f64(double *y, int64_t rows, int64_t cols, const double *bias,
                           int64_t bias_stride, int act) {
  BIAS_ACT(double);
}
