#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

void t_random(double *buf, int64_t n, uint64_t seed, double lo, double hi) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  for (int64_t i = 0; i < n; i++) {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    uint64_t r = s * 0x2545F4914F6CDD1Dull;
    buf[i] = lo + (hi - lo) * ((double)(r >> 11) * 0x1.0p-53);
  }
}

eng_tensor_t *t_tensor(const double *values, const int64_t *shape, int ndim, eng_dtype_t dt) {
  eng_tensor_t *t = NULL;
  T_OK(eng_tensor_from_f64(values, shape, ndim, dt, ENG_CPU_DEVICE, &t));
  return t;
}

eng_tensor_t *t_rand_tensor(const int64_t *shape, int ndim, eng_dtype_t dt, uint64_t seed, double lo,
                            double hi) {
  int64_t n = t_numel(shape, ndim);
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  t_random(v, n, seed, lo, hi);
  eng_tensor_t *t = t_tensor(v, shape, ndim, dt);
  free(v);
  return t;
}

double *t_values(const eng_tensor_t *t) {
  int64_t n = eng_tensor_numel(t);
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  T_OK(eng_tensor_to_f64(t, v));
  return v;
}

double t_rel_err(const eng_tensor_t *t, const double *ref, int64_t n) {
  cr_assert_eq(eng_tensor_numel(t), n, "numel %lld != %lld", (long long)eng_tensor_numel(t), (long long)n);
  double *v = t_values(t);
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = v[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  free(v);
  if (den == 0) return sqrt(num);
  return sqrt(num / den);
}

double t_max_abs_err(const eng_tensor_t *t, const double *ref, int64_t n) {
  double *v = t_values(t);
  double m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs(v[i] - ref[i]);
    if (d > m || d != d) m = d;
  }
  free(v);
  return m;
}

double t_tol(eng_dtype_t dt) {
  switch (dt) {
  case ENG_F64: return 1e-12;
  case ENG_F32: return 1e-5;
  case ENG_F16:
  case ENG_BF16: return 1e-2;
  default: return 0;
  }
}

int t_run_capture(const char *cmd, char **output) {
  char full[8192];
  snprintf(full, sizeof full, "%s 2>&1", cmd);
  FILE *p = popen(full, "r");
  cr_assert(p != NULL, "popen failed for %s", cmd);
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t got;
  while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
    len += got;
    if (cap - len < 2) buf = realloc(buf, cap *= 2);
  }
  buf[len] = 0;
  int status = pclose(p);
  *output = buf;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int64_t t_numel(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

int64_t t_flat_index(const int64_t *c, const int64_t *shape, int ndim) {
  int64_t f = 0;
  for (int d = 0; d < ndim; d++) f = f * shape[d] + c[d];
  return f;
}

void t_coords(int64_t f, const int64_t *shape, int ndim, int64_t *c) {
  for (int d = ndim - 1; d >= 0; d--) c[d] = f % shape[d], f /= shape[d];
}
