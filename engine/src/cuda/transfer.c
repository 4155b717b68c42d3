/* Host <-> device copies of pageable host memory. The DMA engine can only read and write pinned
 * memory, so each device has two pinned 8 MiB staging buffers: a copy goes through them in chunks,
 * alternating, so that the host memcpy of one chunk overlaps the DMA of the other. Each buffer has
 * an event marking the end of its last DMA. Both copies return once all their DMAs are done, so the
 * staging buffers are idle between calls and the host may reuse its buffer at once. */
#include <pthread.h>
#include <string.h>

#include "cuda/cuda_internal.h"

#define CHUNK ((size_t)8 << 20)

typedef struct {
  pthread_mutex_t lock; /* one copy at a time per device: they share the buffers */
  char *buf[2];
  cudaEvent_t done[2];
} staging_t;

static staging_t staging[ENG_CUDA_MAX_DEVICES];
static pthread_once_t staging_once = PTHREAD_ONCE_INIT;

static void init_locks(void) {
  for (int d = 0; d < ENG_CUDA_MAX_DEVICES; d++) pthread_mutex_init(&staging[d].lock, NULL);
}

/* Allocates the device's buffers on first use (device current, lock held). */
static eng_status_t staging_ready(staging_t *st) {
  for (int k = 0; k < 2; k++) {
    cudaError_t err = cudaSuccess;
    if (!st->buf[k]) {
      void *p = NULL;
      err = cudaHostAlloc(&p, CHUNK, cudaHostAllocDefault);
      if (err) return eng_cuda_error(err, "cudaHostAlloc (pinned staging buffer)");
      st->buf[k] = p;
    }
    if (!st->done[k]) {
      err = cudaEventCreateWithFlags(&st->done[k], cudaEventDisableTiming);
      if (err) {
        st->done[k] = NULL;
        return eng_cuda_error(err, "cudaEventCreate");
      }
    }
  }
  return ENG_OK;
}

/* What both directions check first; *stream is set and the device's staging is locked on success. */
static eng_status_t begin_copy(const char *op, int device, const void *dst, const void *src,
                               size_t nbytes, eng_stream_t s, cudaStream_t *stream) {
  eng_status_t st = eng_cuda_select(device);
  if (st) return st;
  if (nbytes && (!dst || !src)) return eng_error(ENG_ERR_ARG, "cuda: %s: NULL buffer", op);
  if (eng_cuda_capture_pool(device))
    return eng_error(ENG_ERR_DEVICE,
                     "cuda: %s: host<->device copies cannot be captured in a graph (cuda:%d is "
                     "capturing)",
                     op, device);
  *stream = (cudaStream_t)s;
  if (!*stream && (st = eng_cuda_stream_of(device, stream))) return st;
  pthread_once(&staging_once, init_locks);
  pthread_mutex_lock(&staging[device].lock);
  st = staging_ready(&staging[device]);
  if (st) pthread_mutex_unlock(&staging[device].lock);
  return st;
}

/* Waits for both buffers' last DMA (also after an error, so the next copy finds them idle) and
 * unlocks. Returns the first error. */
static eng_status_t end_copy(int device, cudaError_t err, const char *what) {
  staging_t *st = &staging[device];
  for (int k = 0; k < 2; k++) {
    cudaError_t e = cudaEventSynchronize(st->done[k]);
    if (!err && e) {
      err = e;
      what = "cudaEventSynchronize";
    }
  }
  pthread_mutex_unlock(&st->lock);
  return err ? eng_cuda_error(err, what) : ENG_OK;
}

static size_t chunk_len(size_t nbytes, size_t k) {
  size_t off = k * CHUNK;
  return nbytes - off < CHUNK ? nbytes - off : CHUNK;
}

eng_status_t eng_cuda_copy_h2d(int device, void *dst, const void *src, size_t nbytes, eng_stream_t s) {
  cudaStream_t stream;
  if (nbytes == 0) return eng_cuda_check_device(device);
  eng_status_t st = begin_copy("copy_h2d", device, dst, src, nbytes, s, &stream);
  if (st) return st;
  staging_t *sg = &staging[device];
  size_t n = (nbytes + CHUNK - 1) / CHUNK;
  cudaError_t err = cudaSuccess;
  const char *what = "";
  for (size_t k = 0; k < n && !err; k++) {
    int b = (int)(k & 1);
    size_t len = chunk_len(nbytes, k);
    /* Buffer b last carried chunk k-2: its DMA must be done before it is overwritten. */
    if (k >= 2 && (err = cudaEventSynchronize(sg->done[b]))) {
      what = "cudaEventSynchronize";
      break;
    }
    memcpy(sg->buf[b], (const char *)src + k * CHUNK, len);
    if ((err = cudaMemcpyAsync((char *)dst + k * CHUNK, sg->buf[b], len, cudaMemcpyHostToDevice, stream))) {
      what = "cudaMemcpyAsync (host to device)";
      break;
    }
    if ((err = cudaEventRecord(sg->done[b], stream))) what = "cudaEventRecord";
  }
  return end_copy(device, err, what);
}

/* Starts the DMA of chunk k into buffer k&1 and marks its end. */
static cudaError_t d2h_issue(staging_t *sg, const void *src, size_t nbytes, size_t k,
                             cudaStream_t stream, const char **what) {
  int b = (int)(k & 1);
  cudaError_t err = cudaMemcpyAsync(sg->buf[b], (const char *)src + k * CHUNK, chunk_len(nbytes, k),
                                    cudaMemcpyDeviceToHost, stream);
  if (err) {
    *what = "cudaMemcpyAsync (device to host)";
    return err;
  }
  err = cudaEventRecord(sg->done[b], stream);
  if (err) *what = "cudaEventRecord";
  return err;
}

eng_status_t eng_cuda_copy_d2h(int device, void *dst, const void *src, size_t nbytes, eng_stream_t s) {
  cudaStream_t stream;
  if (nbytes == 0) return eng_cuda_check_device(device);
  eng_status_t st = begin_copy("copy_d2h", device, dst, src, nbytes, s, &stream);
  if (st) return st;
  staging_t *sg = &staging[device];
  size_t n = (nbytes + CHUNK - 1) / CHUNK;
  const char *what = "";
  cudaError_t err = d2h_issue(sg, src, nbytes, 0, stream, &what);
  for (size_t k = 0; k < n && !err; k++) {
    /* Chunk k+1 goes into the buffer chunk k-1 used, which the host copied out last iteration. */
    if (k + 1 < n && (err = d2h_issue(sg, src, nbytes, k + 1, stream, &what))) break;
    if ((err = cudaEventSynchronize(sg->done[k & 1]))) {
      what = "cudaEventSynchronize";
      break;
    }
    memcpy((char *)dst + k * CHUNK, sg->buf[k & 1], chunk_len(nbytes, k));
  }
  return end_copy(device, err, what);
}
