/* Devices, streams, events and NVTX ranges: the CUDA runtime as eng_cuda.h presents it.
 *
 * Streams: each device has one engine default stream (non-blocking, so it neither waits for nor
 * blocks the legacy stream 0, and graph capture works on it), created on first use and shared by
 * all threads. The *current* stream is per thread and per device, like PyTorch's: a thread that
 * sets a user stream does not move the work of other threads. */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_internal.h"

eng_status_t eng_cuda_error(cudaError_t err, const char *what) {
  cudaGetLastError(); /* so that the next call does not report this error again */
  return eng_error(err == cudaErrorMemoryAllocation ? ENG_ERR_OOM : ENG_ERR_DEVICE,
                   "cuda: %s failed: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

/* ---- devices ---- */

eng_status_t eng_cuda_check_device(int device) {
  int n = eng_cuda_device_count();
  if (n > ENG_CUDA_MAX_DEVICES) n = ENG_CUDA_MAX_DEVICES;
  if (device >= 0 && device < n) return ENG_OK;
  if (n == 0)
    return eng_error(ENG_ERR_DEVICE, "cuda: device %d does not exist (no CUDA GPU was found)", device);
  return eng_error(ENG_ERR_DEVICE, "cuda: device %d does not exist (%d device%s)", device, n,
                   n == 1 ? "" : "s");
}

/* The device this thread last found or made current here (-1: not known). Every op selects its
 * device (dispatch, then the allocator), and a cudaGetDevice each time is a runtime call on the
 * launch path; the engine's code moves a thread's device only through eng_cuda_select (or moves
 * it back, as segment_free does), so the cache stays true. (A host program that calls
 * cudaSetDevice itself, on a thread that then runs engine ops on another device, is not seen.) */
static _Thread_local int selected = -1;

eng_status_t eng_cuda_select(int device) {
  eng_status_t st = eng_cuda_check_device(device);
  if (st) return st;
  if (selected == device) return ENG_OK;
  int cur = -1;
  if (cudaGetDevice(&cur) == cudaSuccess && cur == device) {
    selected = device;
    return ENG_OK;
  }
  selected = -1;
  cudaError_t err = cudaSetDevice(device);
  if (err) return eng_cuda_error(err, "cudaSetDevice");
  selected = device;
  return ENG_OK;
}

eng_status_t eng_cuda_properties(int device, eng_cuda_props_t *out) {
  eng_status_t st = eng_cuda_check_device(device);
  if (st) return st;
  struct cudaDeviceProp p;
  cudaError_t err = cudaGetDeviceProperties(&p, device);
  if (err) return eng_cuda_error(err, "cudaGetDeviceProperties");
  /* CUDA 13 dropped the clock rates from cudaDeviceProp; they remain device attributes. */
  int clock = 0, memory_clock = 0;
  err = cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, device);
  if (!err) err = cudaDeviceGetAttribute(&memory_clock, cudaDevAttrMemoryClockRate, device);
  if (err) return eng_cuda_error(err, "cudaDeviceGetAttribute");
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", p.name);
  out->major = p.major;
  out->minor = p.minor;
  out->sm_count = p.multiProcessorCount;
  out->total_memory = p.totalGlobalMem;
  out->l2_bytes = (size_t)p.l2CacheSize;
  out->smem_per_block_optin = p.sharedMemPerBlockOptin;
  out->max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  out->clock_khz = clock;
  out->memory_clock_khz = memory_clock;
  out->memory_bus_bits = p.memoryBusWidth;
  return ENG_OK;
}

/* ---- streams ---- */

static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaStream_t default_streams[ENG_CUDA_MAX_DEVICES]; /* written once, under stream_lock */
static _Thread_local cudaStream_t current[ENG_CUDA_MAX_DEVICES]; /* NULL: the default stream */

static eng_status_t default_stream(int device, cudaStream_t *out) {
  cudaStream_t s = __atomic_load_n(&default_streams[device], __ATOMIC_ACQUIRE);
  if (s) {
    *out = s;
    return ENG_OK;
  }
  pthread_mutex_lock(&stream_lock);
  eng_status_t st = ENG_OK;
  s = default_streams[device];
  if (!s) {
    st = eng_cuda_select(device);
    cudaError_t err = st ? cudaSuccess : cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (err)
      st = eng_cuda_error(err, "cudaStreamCreateWithFlags");
    else if (!st)
      __atomic_store_n(&default_streams[device], s, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&stream_lock);
  if (!st) *out = s;
  return st;
}

eng_status_t eng_cuda_stream_of(int device, cudaStream_t *out) {
  eng_status_t st = eng_cuda_check_device(device);
  if (st) return st;
  if (current[device]) {
    *out = current[device];
    return ENG_OK;
  }
  return default_stream(device, out);
}

eng_stream_t eng_cuda_current_stream(int device) {
  cudaStream_t s;
  return eng_cuda_stream_of(device, &s) ? NULL : (eng_stream_t)s;
}

eng_status_t eng_cuda_set_current_stream(int device, eng_stream_t s) {
  eng_status_t st = eng_cuda_check_device(device);
  if (st) return st;
  if (eng_cuda_capture_pool(device))
    return eng_error(ENG_ERR_DEVICE,
                     "cuda: the current stream of cuda:%d cannot change while a graph is being "
                     "captured on it",
                     device);
  if (s) {
    int owner = -1;
    cudaError_t err = cudaStreamGetDevice((cudaStream_t)s, &owner);
    if (err) return eng_cuda_error(err, "cudaStreamGetDevice");
    if (owner != device)
      return eng_error(ENG_ERR_DEVICE, "cuda: the stream belongs to cuda:%d, not cuda:%d", owner,
                       device);
  }
  current[device] = (cudaStream_t)s;
  return ENG_OK;
}

eng_status_t eng_cuda_stream_new(int device, eng_stream_t *out) {
  eng_status_t st = eng_cuda_select(device);
  if (st) return st;
  cudaStream_t s;
  cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (err) return eng_cuda_error(err, "cudaStreamCreateWithFlags");
  *out = (eng_stream_t)s;
  return ENG_OK;
}

void eng_cuda_stream_free(eng_stream_t s) {
  if (!s) return;
  for (int d = 0; d < ENG_CUDA_MAX_DEVICES; d++) {
    if (__atomic_load_n(&default_streams[d], __ATOMIC_ACQUIRE) == (cudaStream_t)s) return;
    if (current[d] == (cudaStream_t)s) current[d] = NULL;
  }
  /* The allocator may hand this stream's cached blocks to a later stream that reuses the handle:
   * wait for the stream's work first so that nothing still uses them. */
  cudaStreamSynchronize((cudaStream_t)s);
  cudaStreamDestroy((cudaStream_t)s);
  cudaGetLastError();
}

eng_status_t eng_cuda_stream_synchronize(eng_stream_t s) {
  if (!s) return eng_error(ENG_ERR_ARG, "cuda: stream_synchronize: no stream given");
  cudaError_t err = cudaStreamSynchronize((cudaStream_t)s);
  return err ? eng_cuda_error(err, "cudaStreamSynchronize") : ENG_OK;
}

eng_status_t eng_cuda_synchronize(int device) {
  eng_status_t st = eng_cuda_select(device);
  if (st) return st;
  if (eng_cuda_capture_pool(device))
    return eng_error(ENG_ERR_DEVICE, "cuda: cannot synchronize cuda:%d while a graph is being captured",
                     device);
  cudaError_t err = cudaDeviceSynchronize();
  return err ? eng_cuda_error(err, "cudaDeviceSynchronize") : ENG_OK;
}

/* ---- events ---- */

eng_status_t eng_cuda_event_new(int device, eng_event_t *out) {
  eng_status_t st = eng_cuda_select(device);
  if (st) return st;
  cudaEvent_t e;
  cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDefault);
  if (err) return eng_cuda_error(err, "cudaEventCreate");
  *out = (eng_event_t)e;
  return ENG_OK;
}

void eng_cuda_event_free(eng_event_t e) {
  if (e) cudaEventDestroy((cudaEvent_t)e);
}

eng_status_t eng_cuda_event_record(eng_event_t e, eng_stream_t s) {
  /* NULL would mean the legacy stream 0, which the engine's non-blocking streams do not wait for. */
  if (!e || !s) return eng_error(ENG_ERR_ARG, "cuda: event_record needs an event and a stream");
  cudaError_t err = cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s);
  return err ? eng_cuda_error(err, "cudaEventRecord") : ENG_OK;
}

eng_status_t eng_cuda_event_synchronize(eng_event_t e) {
  if (!e) return eng_error(ENG_ERR_ARG, "cuda: event_synchronize: no event given");
  cudaError_t err = cudaEventSynchronize((cudaEvent_t)e);
  return err ? eng_cuda_error(err, "cudaEventSynchronize") : ENG_OK;
}

eng_status_t eng_cuda_event_elapsed(eng_event_t start, eng_event_t end, float *ms) {
  if (!start || !end) return eng_error(ENG_ERR_ARG, "cuda: event_elapsed needs two events");
  cudaError_t err = cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end);
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return eng_error(ENG_ERR_DEVICE,
                     "cuda: event_elapsed: the events have not completed yet (synchronize the end "
                     "event first)");
  }
  return err ? eng_cuda_error(err, "cudaEventElapsedTime (were both events recorded?)") : ENG_OK;
}

/* ---- NVTX ---- */

static int nvtx_on = 1;

void eng_cuda_nvtx_enable(int on) { __atomic_store_n(&nvtx_on, on != 0, __ATOMIC_RELAXED); }

int eng_cuda_nvtx_push(const char *name) {
  if (!__atomic_load_n(&nvtx_on, __ATOMIC_RELAXED)) return 0;
  nvtxRangePushA(name);
  return 1;
}

void eng_cuda_nvtx_pop(void) { nvtxRangePop(); }
