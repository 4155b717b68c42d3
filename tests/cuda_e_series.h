/* Helpers of the CUDA E-series tests (test_cuda_e1.c, test_cuda_e23.c): run an op with several
 * outputs on the CPU (the reference) and on cuda:0 into NaN-poisoned preset outputs, and compare
 * every output under a tolerance. */
#ifndef TEST_CUDA_E_SERIES_H
#define TEST_CUDA_E_SERIES_H

#include "cuda_numeric.h"

/* ||got - want|| / ||want|| <= tol, and no NaN/Inf in got (every element written, nothing blew
 * up); releases got. */
static inline void close_within(eng_tensor_t *got, eng_tensor_t *want, double tol,
                                const char *what) {
  cr_assert(eng_shape_equal(got, want) && got->dtype == want->dtype, "%s: shape or dtype differ",
            what);
  eng_tensor_t *host = NULL;
  T_OK(eng_tensor_to_device(got, ENG_CPU_DEVICE, &host));
  double *g = t_values(host), *w = t_values(want), num = 0, den = 0;
  const int64_t n = eng_tensor_numel(want);
  for (int64_t i = 0; i < n; i++) {
    cr_assert(isfinite(g[i]), "%s: element %lld is %g (want %g)", what, (long long)i, g[i], w[i]);
    num += (g[i] - w[i]) * (g[i] - w[i]);
    den += w[i] * w[i];
  }
  const double err = den > 0 ? sqrt(num / den) : sqrt(num);
  cr_assert(err <= tol, "%s [%s, %lld elements]: rel err %g > %g", what,
            eng_dtype_name(want->dtype), (long long)n, err, tol);
  free(g), free(w);
  eng_tensor_release(host);
  eng_tensor_release(got);
}

/* Runs op `id` on the CPU inputs in[k].c and on the GPU inputs in[k].g (absent inputs: both
 * NULL), the GPU into poisoned outputs, and compares output k under tol[k] (a tolerance < 0
 * skips that output). Returns the CPU outputs in ref (when not NULL; else releases them). */
static inline void compare_op(eng_op_id_t id, const pair_t *in, int n_in, eng_op_attrs_t attrs,
                              const double *tol, const char *const *names, const char *what,
                              eng_tensor_t **ref) {
  eng_tensor_t *ci[16], *gi[16];
  for (int k = 0; k < n_in; k++) ci[k] = in[k].c, gi[k] = in[k].g;
  eng_op_call_t cpu = {.id = id, .n_in = n_in, .in = ci, .attrs = attrs};
  eng_status_t st = eng_op_dispatch(&cpu);
  cr_assert(st == ENG_OK, "%s: the CPU reference failed: %s", what, eng_last_error());
  eng_op_call_t gpu = {.id = id, .n_in = n_in, .in = gi, .attrs = attrs, .n_out = cpu.n_out};
  for (int k = 0; k < cpu.n_out; k++)
    gpu.out[k] = poisoned(cpu.out[k]->shape, cpu.out[k]->ndim, cpu.out[k]->dtype, GPU0);
  st = eng_op_dispatch(&gpu);
  cr_assert(st == ENG_OK, "%s on cuda failed: %s", what, eng_last_error());
  for (int k = 0; k < cpu.n_out; k++) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s", what, names[k]);
    if (tol[k] >= 0)
      close_within(gpu.out[k], cpu.out[k], tol[k], msg);
    else
      eng_tensor_release(gpu.out[k]);
    if (ref)
      ref[k] = cpu.out[k];
    else
      eng_tensor_release(cpu.out[k]);
  }
}

/* Op `id` on the GPU inputs in[k].g captured in a CUDA graph and replayed gives the outputs it
 * gives eagerly, bit for bit (the backwards' weight gradients accumulate GEMMs into one output,
 * the big one autotuned only outside capture). */
static inline void same_in_a_graph(eng_op_id_t id, const pair_t *in, int n_in,
                                   eng_op_attrs_t attrs, const char *what) {
  eng_tensor_t *gi[16];
  for (int k = 0; k < n_in; k++) gi[k] = in[k].g;
  eng_op_call_t eager = {.id = id, .n_in = n_in, .in = gi, .attrs = attrs};
  eng_status_t st = eng_op_dispatch(&eager);
  cr_assert(st == ENG_OK, "%s: eager: %s", what, eng_last_error());
  eng_cuda_graph_t *g = NULL;
  T_OK(eng_cuda_graph_begin(0, &g));
  eng_op_call_t cap = {.id = id, .n_in = n_in, .in = gi, .attrs = attrs};
  st = eng_op_dispatch(&cap);
  T_OK(eng_cuda_graph_end(&g));
  cr_assert(st == ENG_OK, "%s: captured: %s", what, eng_last_error());
  T_OK(eng_cuda_graph_replay(g));
  for (int k = 0; k < eager.n_out; k++) {
    eng_tensor_t *want = NULL;
    T_OK(eng_tensor_to_device(eager.out[k], ENG_CPU_DEVICE, &want));
    char msg[512];
    snprintf(msg, sizeof msg, "%s: output %d replayed from a graph", what, k);
    close_within(cap.out[k], want, 0.0, msg);
    eng_tensor_release(want);
    eng_tensor_release(eager.out[k]);
  }
  eng_cuda_graph_free(g);
}

/* A random tensor on both devices; when `strided`, a view with a row stride (columns 1..n of a
 * wider tensor), so that the GPU operand is not contiguous. */
static inline pair_t e_rand(const int64_t *shape, int nd, eng_dtype_t dt, uint64_t seed, double lo,
                            double hi, int strided) {
  if (!strided) return pair_rand(shape, nd, dt, seed, lo, hi);
  int64_t wide[8];
  for (int k = 0; k < nd; k++) wide[k] = shape[k];
  wide[nd - 1] += 3;
  pair_t base = pair_rand(wide, nd, dt, seed, lo, hi);
  return pair_consume(base, pair_narrow(base, nd - 1, 1, shape[nd - 1]));
}

/* The upstream gradients of an output: a random tensor shaped like it, on both devices. */
static inline pair_t e_like(const eng_tensor_t *t, uint64_t seed) {
  return pair_rand(t->shape, t->ndim, t->dtype, seed, -1, 1);
}

#endif
