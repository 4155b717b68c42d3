/* The copy and fill ops on CUDA. A copy runs here when either side is on a GPU (dispatch made that
 * side's device current):
 *   on one GPU:     the copy kernel (through a dense temporary when source and destination overlap);
 *   host -> GPU:    dtype and layout fixed up by the CPU copy into a dense host tensor, which goes
 *                   over straight into a dense destination, else into a device temporary that the
 *                   kernel then spreads (broadcast, strides) into the destination;
 *   GPU -> host:    the mirror: fixed up on the GPU, then straight into a dense destination, else
 *                   into a host temporary that the CPU copy spreads;
 *   GPU i -> GPU j: fixed up on i, a peer copy to j (into the destination or a temporary there). */
#include <string.h>

#include "core/tensor_internal.h"
#include "cuda/copy.h"
#include "cuda/cuda_internal.h"
#include "cuda/fill.h"
#include "ops/ops_internal.h"

static eng_status_t cuda_failed(const char *op, int err) {
  cudaGetLastError(); /* clear it, so that the next check does not report it again */
  return eng_error(ENG_ERR_DEVICE, "%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)err));
}

/* The strides of a source (shape, stride, ndim) seen from dst's dims: missing leading dims and
 * size-1 dims broadcast (stride 0). */
static void broadcast_strides(const int64_t *shape, const int64_t *stride, int ndim,
                              const eng_tensor_t *dst, int64_t *out) {
  int lead = dst->ndim - ndim;
  for (int d = 0; d < dst->ndim; d++) {
    int s = d - lead;
    out[d] = s < 0 || shape[s] == 1 ? 0 : stride[s];
  }
}

/* The addresses [lo, hi) that t's elements occupy (t not empty). */
static void byte_span(const eng_tensor_t *t, uintptr_t *lo, uintptr_t *hi) {
  int64_t last = 0;
  for (int d = 0; d < t->ndim; d++) last += (t->shape[d] - 1) * t->stride[d];
  *lo = (uintptr_t)eng_tensor_data(t);
  *hi = *lo + (uintptr_t)(last + 1) * eng_dtype_size(t->dtype);
}

/* dst <- device memory at src of dtype src_dt, read with src_stride (in dst's dims). */
static eng_status_t run_kernel(eng_tensor_t *dst, const void *src, eng_dtype_t src_dt,
                               const int64_t *src_stride, cudaStream_t stream) {
  int err = eng_kcuda_copy(eng_tensor_data(dst), dst->dtype, dst->stride, src, src_dt, src_stride,
                           dst->shape, dst->ndim, stream);
  return err ? cuda_failed("copy", err) : ENG_OK;
}

/* dst <- a dense device buffer of dst's dtype holding a row-major `shape`, broadcast into dst. */
static eng_status_t spread_dense(eng_tensor_t *dst, const void *buf, const int64_t *shape, int ndim,
                                 cudaStream_t stream) {
  int64_t dense[ENG_MAX_DIMS], seen[ENG_MAX_DIMS];
  eng_contiguous_strides(shape, ndim, dense);
  broadcast_strides(shape, dense, ndim, dst, seen);
  return run_kernel(dst, buf, dst->dtype, seen, stream);
}

/* A dense copy of t with dtype dt on t's device (t itself when it is one already). */
static eng_status_t dense_as(eng_tensor_t *t, eng_dtype_t dt, eng_tensor_t **out) {
  eng_tensor_t *conv = NULL;
  eng_status_t st = eng_tensor_to_dtype(t, dt, &conv);
  if (!st) st = eng_tensor_contiguous(conv, out);
  eng_tensor_release(conv);
  return st;
}

/* Whether a dense source of dense's shape fills dst element for element (no broadcast). */
static int fills_directly(const eng_tensor_t *dst, const eng_tensor_t *dense) {
  return eng_tensor_is_contiguous(dst) && eng_tensor_numel(dst) == eng_tensor_numel(dense);
}

static eng_status_t copy_same_device(eng_tensor_t *dst, const eng_tensor_t *src, int device,
                                     cudaStream_t stream) {
  int64_t seen[ENG_MAX_DIMS];
  broadcast_strides(src->shape, src->stride, src->ndim, dst, seen);
  uintptr_t slo, shi, dlo, dhi;
  byte_span(src, &slo, &shi);
  byte_span(dst, &dlo, &dhi);
  if (!(slo < dhi && dlo < shi)) return run_kernel(dst, eng_tensor_data(src), src->dtype, seen, stream);
  if (slo == dlo && src->dtype == dst->dtype &&
      !memcmp(seen, dst->stride, sizeof(int64_t) * (size_t)dst->ndim))
    return ENG_OK; /* copying a tensor onto itself */
  /* The source overlaps the destination: read everything before writing anything. */
  void *tmp = NULL;
  eng_status_t st = eng_cuda_malloc(device, eng_tensor_nbytes(src), stream, &tmp);
  if (st) return st;
  int64_t dense[ENG_MAX_DIMS];
  eng_contiguous_strides(src->shape, src->ndim, dense);
  int err = eng_kcuda_copy(tmp, src->dtype, dense, eng_tensor_data(src), src->dtype, src->stride,
                           src->shape, src->ndim, stream);
  if (err) {
    st = cuda_failed("copy", err);
  } else {
    broadcast_strides(src->shape, dense, src->ndim, dst, seen);
    st = run_kernel(dst, tmp, src->dtype, seen, stream);
  }
  eng_cuda_free(device, tmp);
  return st;
}

static eng_status_t copy_from_host(eng_tensor_t *dst, eng_tensor_t *src, int device,
                                   cudaStream_t stream) {
  eng_tensor_t *host = NULL;
  eng_status_t st = dense_as(src, dst->dtype, &host); /* the CPU copy: CPU conversion rules */
  if (st) return st;
  size_t nbytes = eng_tensor_nbytes(host);
  if (fills_directly(dst, host)) {
    st = eng_cuda_copy_h2d(device, eng_tensor_data(dst), eng_tensor_data(host), nbytes, stream);
  } else {
    void *buf = NULL;
    st = eng_cuda_malloc(device, nbytes, stream, &buf);
    if (!st) st = eng_cuda_copy_h2d(device, buf, eng_tensor_data(host), nbytes, stream);
    if (!st) st = spread_dense(dst, buf, host->shape, host->ndim, stream);
    if (buf) eng_cuda_free(device, buf);
  }
  eng_tensor_release(host);
  return st;
}

static eng_status_t copy_to_host(eng_tensor_t *dst, eng_tensor_t *src, int device,
                                 cudaStream_t stream) {
  eng_tensor_t *dense = NULL, *host = NULL;
  eng_status_t st = dense_as(src, dst->dtype, &dense); /* on the GPU */
  if (st) return st;
  size_t nbytes = eng_tensor_nbytes(dense);
  if (fills_directly(dst, dense)) {
    st = eng_cuda_copy_d2h(device, eng_tensor_data(dst), eng_tensor_data(dense), nbytes, stream);
  } else {
    st = eng_tensor_empty_for("copy", dense->shape, dense->ndim, dst->dtype, ENG_CPU_DEVICE, &host);
    if (!st) st = eng_cuda_copy_d2h(device, eng_tensor_data(host), eng_tensor_data(dense), nbytes, stream);
    if (!st) {
      eng_tensor_t *in[1] = {host};
      eng_op_call_t spread = {.id = ENG_OP_COPY, .n_in = 1, .in = in, .n_out = 1, .out = {dst}};
      st = eng_cpu_copy(&spread);
    }
  }
  eng_tensor_release(host);
  eng_tensor_release(dense);
  return st;
}

/* Makes `waiter` wait for the work issued so far on `producer`, a stream of cuda:producer_device
 * (which is left the current device). */
static eng_status_t stream_wait(cudaStream_t waiter, int producer_device, cudaStream_t producer) {
  eng_status_t st = eng_cuda_select(producer_device);
  if (st) return st;
  cudaEvent_t ev;
  cudaError_t err = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (err) return cuda_failed("copy", err);
  err = cudaEventRecord(ev, producer);
  if (!err) err = cudaStreamWaitEvent(waiter, ev, 0);
  cudaEventDestroy(ev); /* released once the wait is satisfied */
  return err ? cuda_failed("copy", err) : ENG_OK;
}

static eng_status_t copy_between_devices(eng_tensor_t *dst, eng_tensor_t *src, int device,
                                         cudaStream_t stream) {
  const int from = src->storage->device.index;
  eng_tensor_t *dense = NULL;
  cudaStream_t from_stream;
  eng_status_t st = dense_as(src, dst->dtype, &dense); /* on cuda:from */
  if (st) return st;
  void *buf = NULL;
  size_t nbytes = eng_tensor_nbytes(dense);
  int direct = fills_directly(dst, dense);
  st = eng_cuda_stream_of(from, &from_stream);
  /* The peer copy, on the destination's stream, starts after `dense` is written on from_stream. */
  if (!st) st = stream_wait(stream, from, from_stream);
  if (!st) st = eng_cuda_select(device);
  if (!st && !direct) st = eng_cuda_malloc(device, nbytes, stream, &buf);
  if (!st) {
    int err = cudaMemcpyPeerAsync(direct ? eng_tensor_data(dst) : buf, device, eng_tensor_data(dense),
                                  from, nbytes, stream);
    if (err) st = cuda_failed("copy", err);
  }
  /* `dense` goes back to from_stream's cache when released: later work there waits for the copy. */
  if (!st) st = stream_wait(from_stream, device, stream);
  if (!st && !direct) st = spread_dense(dst, buf, dense->shape, dense->ndim, stream);
  if (buf) eng_cuda_free(device, buf);
  eng_tensor_release(dense);
  return st;
}

eng_status_t eng_cuda_copy(const eng_op_call_t *call) {
  eng_tensor_t *src = call->in[0], *dst = call->out[0];
  if (eng_tensor_numel(dst) == 0) return ENG_OK;
  eng_device_t from = src->storage->device, to = dst->storage->device;
  int device = to.type == ENG_DEV_CUDA ? to.index : from.index; /* where dispatch runs the op */
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(device, &stream);
  if (st) return st;
  if (from.type == ENG_DEV_CPU) return copy_from_host(dst, src, device, stream);
  if (to.type == ENG_DEV_CPU) return copy_to_host(dst, src, device, stream);
  if (from.index != to.index) return copy_between_devices(dst, src, device, stream);
  return copy_same_device(dst, src, device, stream);
}

eng_status_t eng_cuda_fill(const eng_op_call_t *call) {
  eng_tensor_t *t = call->out[0];
  cudaStream_t stream;
  eng_status_t st = eng_cuda_stream_of(t->storage->device.index, &stream);
  if (st) return st;
  uint64_t value = 0; /* the value in t's encoding, converted as the CPU fill does */
  eng_store_f64(&value, t->dtype, 0, call->attrs.f[0]);
  int err = eng_kcuda_fill(eng_tensor_data(t), t->dtype, t->stride, t->shape, t->ndim, &value, stream);
  return err ? cuda_failed("fill", err) : ENG_OK;
}
