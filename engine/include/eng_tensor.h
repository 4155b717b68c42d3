/* Tensors: strided views over refcounted storage. Lua-free.
 *
 * Ownership: every function that hands out an eng_tensor_t* hands out one reference, which the
 * caller drops with eng_tensor_release(). Views share storage with their base. Shapes and strides
 * are in elements; strides may be zero (expand) but never negative. */
#ifndef ENG_TENSOR_H
#define ENG_TENSOR_H

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eng_storage {
  int refcount;
  void *data;
  size_t nbytes;
  eng_device_t device;
  /* How the memory is given back: NULL for memory the storage does not own (a wrapped buffer). */
  void (*free_fn)(void *ctx, void *data, size_t nbytes, eng_device_t device);
  void *free_ctx;
  /* Bumped by every in-place write to any view of it (eng_tensor_bump_version); autograd checks
   * the tensors it saved against it. */
  uint32_t version;
} eng_storage_t;

typedef struct eng_tensor {
  int refcount;
  eng_dtype_t dtype;
  int ndim;
  int64_t shape[ENG_MAX_DIMS];
  int64_t stride[ENG_MAX_DIMS];
  int64_t offset; /* in elements, into storage */
  eng_storage_t *storage;
  void *autograd;     /* owned by the autograd layer (eng_autograd.h); NULL when it has no state */
} eng_tensor_t;

/* ---- storage ---- */
eng_status_t eng_storage_new(size_t nbytes, eng_device_t dev, eng_storage_t **out);
/* Wraps memory the caller owns; it must outlive every tensor using it. No copy. */
eng_storage_t *eng_storage_wrap(void *data, size_t nbytes, eng_device_t dev);
void eng_storage_retain(eng_storage_t *s);
void eng_storage_release(eng_storage_t *s);
/* Live bytes allocated by CPU storages (the binding uses this to pace the Lua GC). */
size_t eng_cpu_bytes_live(void);

/* ---- lifetime ---- */
void eng_tensor_retain(eng_tensor_t *t);
void eng_tensor_release(eng_tensor_t *t); /* NULL is fine */

/* ---- queries ---- */
int64_t eng_tensor_numel(const eng_tensor_t *t);
size_t eng_tensor_nbytes(const eng_tensor_t *t); /* numel * dtype size */
int eng_tensor_is_contiguous(const eng_tensor_t *t);
void *eng_tensor_data(const eng_tensor_t *t); /* pointer to element 0 (storage data + offset) */
eng_device_t eng_tensor_device(const eng_tensor_t *t);
/* "[4,3]"; writes into buf and returns it. */
const char *eng_shape_str(const int64_t *shape, int ndim, char *buf, size_t n);
#define ENG_SHAPE_STR(t, buf) eng_shape_str((t)->shape, (t)->ndim, buf, sizeof(buf))
/* Normalises a possibly negative dim against ndim; error names `op`. */
eng_status_t eng_dim_wrap(const char *op, int64_t dim, int ndim, int *out);
int eng_shape_equal(const eng_tensor_t *a, const eng_tensor_t *b);

/* ---- creation (contiguous, fresh storage) ---- */
eng_status_t eng_tensor_empty(const int64_t *shape, int ndim, eng_dtype_t dt, eng_device_t dev,
                              eng_tensor_t **out);
eng_status_t eng_tensor_full(const int64_t *shape, int ndim, double value, eng_dtype_t dt,
                             eng_device_t dev, eng_tensor_t **out);
eng_status_t eng_tensor_zeros(const int64_t *shape, int ndim, eng_dtype_t dt, eng_device_t dev,
                              eng_tensor_t **out);
eng_status_t eng_tensor_ones(const int64_t *shape, int ndim, eng_dtype_t dt, eng_device_t dev,
                             eng_tensor_t **out);
/* start, start+step, ... < end (or > end for negative step). */
eng_status_t eng_tensor_arange(double start, double end, double step, eng_dtype_t dt,
                               eng_device_t dev, eng_tensor_t **out);
eng_status_t eng_tensor_linspace(double start, double end, int64_t steps, eng_dtype_t dt,
                                 eng_device_t dev, eng_tensor_t **out);
eng_status_t eng_tensor_eye(int64_t n, int64_t m, eng_dtype_t dt, eng_device_t dev,
                            eng_tensor_t **out);
/* Copies n values (given as doubles) into a new tensor of the given shape. */
eng_status_t eng_tensor_from_f64(const double *values, const int64_t *shape, int ndim,
                                 eng_dtype_t dt, eng_device_t dev, eng_tensor_t **out);
/* A tensor over a caller's buffer, no copy. strides NULL means contiguous. */
eng_status_t eng_tensor_wrap(void *data, eng_dtype_t dt, const int64_t *shape, int ndim,
                             const int64_t *strides, eng_device_t dev, eng_tensor_t **out);

/* ---- copies and conversion ---- */
/* Copies src into dst elementwise (shapes must match, or src broadcast to dst; dtypes converted).
 * Bumps dst's storage version. */
eng_status_t eng_tensor_copy_(eng_tensor_t *dst, const eng_tensor_t *src);
eng_status_t eng_tensor_clone(const eng_tensor_t *t, eng_tensor_t **out);
/* Returns t itself (one more reference) when already contiguous, else a contiguous copy. */
eng_status_t eng_tensor_contiguous(eng_tensor_t *t, eng_tensor_t **out);
/* Returns t itself when the dtype already matches, else a converted contiguous copy. */
eng_status_t eng_tensor_to_dtype(eng_tensor_t *t, eng_dtype_t dt, eng_tensor_t **out);
/* Returns t itself when already on dev, else a copy there. */
eng_status_t eng_tensor_to_device(eng_tensor_t *t, eng_device_t dev, eng_tensor_t **out);
/* Fills t with value (in place). */
eng_status_t eng_tensor_fill_(eng_tensor_t *t, double value);
/* Reads one element as double; idx has t->ndim entries (0-based, no negatives). */
eng_status_t eng_tensor_get(const eng_tensor_t *t, const int64_t *idx, double *out);
eng_status_t eng_tensor_set(eng_tensor_t *t, const int64_t *idx, double value);
/* Copies all elements (row-major) into a caller array of numel doubles. CPU or any device. */
eng_status_t eng_tensor_to_f64(const eng_tensor_t *t, double *values);

/* ---- views (share storage; no data copied) ---- */
/* view: requires a stride-compatible layout (ENG_ERR_LAYOUT otherwise). One -1 is inferred. */
eng_status_t eng_tensor_view(eng_tensor_t *t, const int64_t *shape, int ndim, eng_tensor_t **out);
/* reshape: a view when possible, else a contiguous copy. */
eng_status_t eng_tensor_reshape(eng_tensor_t *t, const int64_t *shape, int ndim, eng_tensor_t **out);
eng_status_t eng_tensor_transpose(eng_tensor_t *t, int64_t d0, int64_t d1, eng_tensor_t **out);
eng_status_t eng_tensor_permute(eng_tensor_t *t, const int64_t *perm, int ndim, eng_tensor_t **out);
/* Elements start .. start+length-1 along dim. */
eng_status_t eng_tensor_narrow(eng_tensor_t *t, int64_t dim, int64_t start, int64_t length,
                               eng_tensor_t **out);
/* Python-style slice along dim: start:stop:step (step > 0; start/stop clamped; negatives count from
 * the end). */
eng_status_t eng_tensor_slice(eng_tensor_t *t, int64_t dim, int64_t start, int64_t stop,
                              int64_t step, eng_tensor_t **out);
/* Removes dim, taking index (negative counts from the end). */
eng_status_t eng_tensor_select(eng_tensor_t *t, int64_t dim, int64_t index, eng_tensor_t **out);
/* dim < 0 ... all size-1 dims when `all` is set; else just `dim` (which must have size 1 or is left). */
eng_status_t eng_tensor_squeeze(eng_tensor_t *t, int64_t dim, int all, eng_tensor_t **out);
eng_status_t eng_tensor_unsqueeze(eng_tensor_t *t, int64_t dim, eng_tensor_t **out);
/* Broadcast to shape (new leading dims allowed; size-1 dims expand with stride 0; -1 keeps). */
eng_status_t eng_tensor_expand(eng_tensor_t *t, const int64_t *shape, int ndim, eng_tensor_t **out);
/* split into pieces of `size` along dim (last may be smaller). *outs is malloc'd, *n set. */
eng_status_t eng_tensor_split(eng_tensor_t *t, int64_t size, int64_t dim, eng_tensor_t ***outs,
                              int *n);
/* chunk into `chunks` nearly equal pieces (torch semantics). */
eng_status_t eng_tensor_chunk(eng_tensor_t *t, int64_t chunks, int64_t dim, eng_tensor_t ***outs,
                              int *n);

/* ---- broadcasting helper used by ops ---- */
eng_status_t eng_broadcast_shapes(const char *op, const eng_tensor_t *const *ts, int n,
                                  int64_t *shape, int *ndim);

/* ---- RNG: counter-based Philox4x32-10 ----
 * Element i of a draw uses block (offset + i/4), word i%4, with key = seed. Each draw advances
 * offset by ceil(n/4) blocks, so the GPU path can reproduce the same numbers by index.
 *
 * The formulas (a contract: every backend computes them in double, bit for bit):
 *   block b = Philox4x32-10 with counter {lo32(b), hi32(b), 0, 0} and key {lo32(seed), hi32(seed)},
 *   giving words w[0..3]; element i reads w = word i%4 of block offset + i/4.
 *   uniform: u = w * 2^-32 for f64, u = (w >> 8) * 2^-24 for the other dtypes;
 *            value = low + (high - low) * u, then stored with the dtype's rounding (so f16/bf16/f32
 *            values may round up to high itself).
 *   normal:  p = (i%4)/2, u1 = (w[2p] + 1.0) * 2^-32 (in (0, 1]), u2 = w[2p+1] * 2^-32,
 *            r = sqrt(-2 log u1); n = r cos(2 pi u2) for even i, r sin(2 pi u2) for odd i;
 *            value = mean + std * n, stored with the dtype's rounding.
 *   randint: value = low + ((uint64_t)w * (high - low) >> 32), with high - low in [1, 2^32]. */
typedef struct {
  uint64_t seed;
  uint64_t offset;
} eng_rng_t;
void eng_rng_seed(eng_rng_t *g, uint64_t seed);
/* The four 32-bit words of Philox4x32-10 at counter (lo 64 bits = ctr, hi 64 bits = 0). */
void eng_philox4x32(uint64_t seed, uint64_t ctr, uint32_t out[4]);
/* Uniform in [low, high). */
eng_status_t eng_tensor_rand(eng_rng_t *g, const int64_t *shape, int ndim, double low, double high,
                             eng_dtype_t dt, eng_device_t dev, eng_tensor_t **out);
/* Normal(mean, std) by Box-Muller: block b gives normals 4b..4b+3 from word pairs (0,1), (2,3). */
eng_status_t eng_tensor_randn(eng_rng_t *g, const int64_t *shape, int ndim, double mean, double std,
                              eng_dtype_t dt, eng_device_t dev, eng_tensor_t **out);
/* Integers uniform in [low, high). */
eng_status_t eng_tensor_randint(eng_rng_t *g, const int64_t *shape, int ndim, int64_t low,
                                int64_t high, eng_dtype_t dt, eng_device_t dev, eng_tensor_t **out);

#ifdef __cplusplus
}
#endif
#endif
