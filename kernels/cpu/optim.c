/* Optimizer kernels as plain loops over dense elements, 16-bit floats widened to f32 on load and
 * rounded once (to nearest even) on store. */
#include "cpu/optim.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "cpu/convert.h"

/* Below this many elements a thread team costs more than it saves. */
#define PARALLEL_MIN 32768

#define AS_IS(x) (x)
/* sqrtf for the f32 math, so that nothing is computed in double by accident. */
#define SQRT_OF(x) _Generic((x), float: sqrtf, default: sqrt)(x)

/* P/G: storage types, LP/LG: their loads to A, SP: the store of A into P. */
#define ADAMW_LOOP(A, P, LP, SP, G, LG)                                                   \
  do {                                                                                    \
    P *p_ = (P *)p;                                                                       \
    const G *g_ = (const G *)g;                                                           \
    A *m_ = (A *)m, *v_ = (A *)v;                                                         \
    const A b1 = (A)h->beta1, b2 = (A)h->beta2, omb1 = (A)h->omb1, omb2 = (A)h->omb2;     \
    const A decay = (A)h->decay, step = (A)h->step_size, bc2 = (A)h->bc2_sqrt,            \
            eps = (A)h->eps;                                                              \
    _Pragma("omp parallel for schedule(static) if (n >= PARALLEL_MIN)")                   \
    for (int64_t i = 0; i < n; i++) {                                                     \
      A gi = (A)LG(g_[i]);                                                                \
      A mi = b1 * m_[i] + omb1 * gi;                                                      \
      A vi = b2 * v_[i] + omb2 * gi * gi;                                                 \
      m_[i] = mi;                                                                         \
      v_[i] = vi;                                                                         \
      A pi = (A)LP(p_[i]) * decay;                                                        \
      p_[i] = SP(pi - step * mi / (SQRT_OF(vi) / bc2 + eps));                                \
    }                                                                                     \
  } while (0)

int eng_kcpu_adamw(void *p, eng_dtype_t pdt, const void *g, eng_dtype_t gdt, void *m, void *v,
                   int64_t n, const eng_k_adamw_t *h) {
  if (pdt == ENG_F64 && gdt == ENG_F64) ADAMW_LOOP(double, double, AS_IS, AS_IS, double, AS_IS);
  else if (pdt == ENG_F64 && gdt == ENG_F32) ADAMW_LOOP(double, double, AS_IS, AS_IS, float, AS_IS);
  else if (pdt == ENG_F32 && gdt == ENG_F32) ADAMW_LOOP(float, float, AS_IS, AS_IS, float, AS_IS);
  else if (pdt == ENG_BF16 && gdt == ENG_BF16)
    ADAMW_LOOP(float, uint16_t, eng_k_bf16_to_f32, eng_k_f32_to_bf16, uint16_t, eng_k_bf16_to_f32);
  else if (pdt == ENG_BF16 && gdt == ENG_F32)
    ADAMW_LOOP(float, uint16_t, eng_k_bf16_to_f32, eng_k_f32_to_bf16, float, AS_IS);
  else if (pdt == ENG_F16 && gdt == ENG_F16)
    ADAMW_LOOP(float, uint16_t, eng_k_f16_to_f32, eng_k_f32_to_f16, uint16_t, eng_k_f16_to_f32);
  else if (pdt == ENG_F16 && gdt == ENG_F32)
    ADAMW_LOOP(float, uint16_t, eng_k_f16_to_f32, eng_k_f32_to_f16, float, AS_IS);
  else return -1;
  return 0;
}

double eng_kcpu_sum_squares(const void *x, eng_dtype_t dt, int64_t n) {
  int64_t nchunks = (n + ENG_K_SUMSQ_CHUNK - 1) / ENG_K_SUMSQ_CHUNK;
  if (nchunks == 0) return 0;
  double one, *part = nchunks == 1 ? &one : malloc(sizeof(double) * (size_t)nchunks);
  int serial = part == NULL; /* out of memory for the partials: one thread, the same order */
  if (serial) part = &one;
  double total = 0;
#pragma omp parallel for schedule(static) if (!serial && n >= PARALLEL_MIN)
  for (int64_t c = 0; c < nchunks; c++) {
    int64_t lo = c * ENG_K_SUMSQ_CHUNK, hi = lo + ENG_K_SUMSQ_CHUNK < n ? lo + ENG_K_SUMSQ_CHUNK : n;
    double s = 0;
    for (int64_t i = lo; i < hi; i++) {
      double v = eng_k_load(x, dt, i);
      s += v * v;
    }
    if (serial) total += s;
    else part[c] = s;
  }
  if (!serial)
    for (int64_t c = 0; c < nchunks; c++) total += part[c];
  if (part != &one) free(part);
  return total;
}

#define SCALE_LOOP(A, P, LP, SP)                                   \
  do {                                                             \
    P *x_ = (P *)x;                                                \
    const A s_ = (A)s;                                             \
    _Pragma("omp parallel for schedule(static) if (n >= PARALLEL_MIN)") \
    for (int64_t i = 0; i < n; i++) x_[i] = SP((A)LP(x_[i]) * s_); \
  } while (0)

int eng_kcpu_scale(void *x, eng_dtype_t dt, int64_t n, double s) {
  switch (dt) {
  case ENG_F64: SCALE_LOOP(double, double, AS_IS, AS_IS); break;
  case ENG_F32: SCALE_LOOP(float, float, AS_IS, AS_IS); break;
  case ENG_BF16: SCALE_LOOP(float, uint16_t, eng_k_bf16_to_f32, eng_k_f32_to_bf16); break;
  case ENG_F16: SCALE_LOOP(float, uint16_t, eng_k_f16_to_f32, eng_k_f32_to_f16); break;
  default: return -1;
  }
  return 0;
}
