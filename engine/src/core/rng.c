/* The counter-based generator's state and the random creation functions. */
#include "core/tensor_internal.h"
#include "cpu/philox.h"
#include "eng_registry.h"

void eng_rng_seed(eng_rng_t *g, uint64_t seed) {
  g->seed = seed;
  g->offset = 0;
}

void eng_philox4x32(uint64_t seed, uint64_t ctr, uint32_t out[4]) { eng_philox_block(seed, ctr, out); }

/* Runs one random creation op from g's current block and moves g past the blocks it used. */
static eng_status_t draw(eng_op_id_t id, eng_rng_t *g, const int64_t *shape, int ndim, double a,
                         double b, eng_dtype_t dt, eng_device_t dev, eng_tensor_t **out) {
  eng_status_t st = eng_shape_check(eng_op_def(id)->name, shape, ndim);
  if (st) return st;
  eng_op_call_t call = {.id = id, .n_out = 1};
  for (int d = 0; d < ndim; d++) call.attrs.i[d] = shape[d];
  call.attrs.ni = ndim;
  call.attrs.f[0] = a;
  call.attrs.f[1] = b;
  call.attrs.u[0] = g->seed;
  call.attrs.u[1] = g->offset;
  call.attrs.dtype = dt;
  call.attrs.device = dev;
  st = eng_op_dispatch(&call);
  if (st) return st;
  g->offset += ((uint64_t)eng_tensor_numel(call.out[0]) + 3) / 4;
  *out = call.out[0];
  return ENG_OK;
}

eng_status_t eng_tensor_rand(eng_rng_t *g, const int64_t *shape, int ndim, double low, double high,
                             eng_dtype_t dt, eng_device_t dev, eng_tensor_t **out) {
  return draw(ENG_OP_RAND, g, shape, ndim, low, high, dt, dev, out);
}

eng_status_t eng_tensor_randn(eng_rng_t *g, const int64_t *shape, int ndim, double mean, double std,
                              eng_dtype_t dt, eng_device_t dev, eng_tensor_t **out) {
  return draw(ENG_OP_RANDN, g, shape, ndim, mean, std, dt, dev, out);
}

/* randint's bounds travel as doubles (attrs.f), exact up to 2^53. */
#define MAX_EXACT 9007199254740992LL

eng_status_t eng_tensor_randint(eng_rng_t *g, const int64_t *shape, int ndim, int64_t low,
                                int64_t high, eng_dtype_t dt, eng_device_t dev, eng_tensor_t **out) {
  if (low < -MAX_EXACT || low > MAX_EXACT || high < -MAX_EXACT || high > MAX_EXACT)
    return eng_error(ENG_ERR_ARG, "randint: bounds beyond +-2^53 are not supported (low %lld, high %lld)",
                     (long long)low, (long long)high);
  return draw(ENG_OP_RANDINT, g, shape, ndim, (double)low, (double)high, dt, dev, out);
}
