/* Helpers shared by the tests: random inputs from a generator independent of the engine's,
 * tensors from double arrays, error measures, and running Lua through the embedding API. */
#ifndef TEST_SUPPORT_H
#define TEST_SUPPORT_H

#include <criterion/criterion.h>
#include "engine.h"

/* xorshift64*-based uniform doubles in [lo, hi): independent of the engine's Philox. */
void t_random(double *buf, int64_t n, uint64_t seed, double lo, double hi);
/* Row-major index arithmetic: element count, flat index of coordinates, coordinates of a flat
 * index. */
int64_t t_numel(const int64_t *shape, int ndim);
int64_t t_flat_index(const int64_t *c, const int64_t *shape, int ndim);
void t_coords(int64_t f, const int64_t *shape, int ndim, int64_t *c);
/* A new CPU tensor holding values (rounded to dt). cr_asserts on failure. */
eng_tensor_t *t_tensor(const double *values, const int64_t *shape, int ndim, eng_dtype_t dt);
/* A new CPU tensor of random values in [lo, hi). */
eng_tensor_t *t_rand_tensor(const int64_t *shape, int ndim, eng_dtype_t dt, uint64_t seed, double lo,
                            double hi);
/* All elements of t as a malloc'd double array (row-major). */
double *t_values(const eng_tensor_t *t);
/* ||t - ref|| / ||ref|| over n elements (ref all zeros: absolute norm). */
double t_rel_err(const eng_tensor_t *t, const double *ref, int64_t n);
double t_max_abs_err(const eng_tensor_t *t, const double *ref, int64_t n);
/* The tolerance the design sets for a dtype (f64 1e-12, f32 1e-5, f16/bf16 1e-2). */
double t_tol(eng_dtype_t dt);
/* Asserts that st is ENG_OK, printing eng_last_error() otherwise. */
#define T_OK(expr)                                                                        \
  do {                                                                                    \
    eng_status_t st_ = (expr);                                                            \
    cr_assert(st_ == ENG_OK, "%s failed: %s", #expr, eng_last_error());                   \
  } while (0)
/* Asserts that expr fails with `code` and that the message contains `needle`. */
#define T_FAILS(expr, code, needle)                                                       \
  do {                                                                                    \
    eng_status_t st_ = (expr);                                                            \
    cr_assert(st_ == (code), "%s: expected status %d, got %d (%s)", #expr, (int)(code),   \
              (int)st_, eng_last_error());                                                \
    cr_assert(strstr(eng_last_error(), (needle)) != NULL, "%s: message '%s' lacks '%s'",  \
              #expr, eng_last_error(), (needle));                                         \
  } while (0)

/* Runs a shell command, capturing stdout+stderr into a malloc'd string; returns exit status. */
int t_run_capture(const char *cmd, char **output);

#endif
