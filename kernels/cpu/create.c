#include "cpu/create.h"

#include "cpu/convert.h"

#define PARALLEL_MIN 32768

void eng_kcpu_arange(void *dst, eng_dtype_t dt, int64_t n, double start, double step, double end,
                     int linspace) {
  const int64_t back_from = linspace && n > 1 ? n / 2 : n;
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
  for (int64_t i = 0; i < n; i++) {
    double v = i >= back_from ? end - (double)(n - 1 - i) * step : start + (double)i * step;
    eng_k_store(dst, dt, i, v);
  }
}

void eng_kcpu_eye(void *dst, eng_dtype_t dt, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) eng_k_store(dst, dt, r * cols + c, r == c ? 1.0 : 0.0);
}
