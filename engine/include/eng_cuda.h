/* The CUDA runtime layer of the core: devices, streams, events, the caching allocator, host<->device
 * copies and graph capture. Lua-free, and declared in every build: without CUDA (or without a GPU)
 * every function fails with ENG_ERR_DEVICE and a clear message, so callers need no #ifdefs.
 *
 * Streams and events are opaque handles (a cudaStream_t / cudaEvent_t underneath). Each device has an
 * engine default stream (a non-blocking stream created on first use, so that graph capture works);
 * ops run on the device's *current* stream, which is the default unless a user stream is set. */
#ifndef ENG_CUDA_H
#define ENG_CUDA_H

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  char name[256];
  int major, minor;        /* compute capability */
  int sm_count;
  size_t total_memory;     /* bytes */
  size_t l2_bytes;
  size_t smem_per_block_optin;
  int max_threads_per_sm;
  int clock_khz;           /* SM clock */
  int memory_clock_khz;
  int memory_bus_bits;
} eng_cuda_props_t;

eng_status_t eng_cuda_properties(int device, eng_cuda_props_t *out);
/* Checks that `device` exists (error names the count). */
eng_status_t eng_cuda_check_device(int device);

/* ---- streams ---- */
typedef void *eng_stream_t;
/* The stream ops on `device` run on now (created on first use). NULL if the device is unusable. */
eng_stream_t eng_cuda_current_stream(int device);
/* Makes s current for its device; NULL restores the default stream. */
eng_status_t eng_cuda_set_current_stream(int device, eng_stream_t s);
eng_status_t eng_cuda_stream_new(int device, eng_stream_t *out);
void eng_cuda_stream_free(eng_stream_t s);
eng_status_t eng_cuda_stream_synchronize(eng_stream_t s);
/* Waits for all work on the device. */
eng_status_t eng_cuda_synchronize(int device);

/* ---- events ---- */
typedef void *eng_event_t;
eng_status_t eng_cuda_event_new(int device, eng_event_t *out);
void eng_cuda_event_free(eng_event_t e);
eng_status_t eng_cuda_event_record(eng_event_t e, eng_stream_t s);
eng_status_t eng_cuda_event_synchronize(eng_event_t e);
/* Milliseconds between two recorded events (both must have completed). */
eng_status_t eng_cuda_event_elapsed(eng_event_t start, eng_event_t end, float *ms);

/* ---- the caching allocator ----
 * Blocks are cached per (device, stream): a freed block is reused only by allocations on the
 * stream it was allocated for, so stream order keeps reuse safe. Small requests (<= 1 MiB) are
 * served from 2 MiB segments, large ones from segments of their rounded size; a cached block larger
 * than needed is split, and free neighbours within one segment merge. On cudaMalloc failure the
 * allocator frees its cached segments, calls the OOM hook (the binding runs a Lua GC step), and
 * retries; then fails with ENG_ERR_OOM and a message giving the bytes asked for and the
 * allocated / cached / free-on-device bytes. */
eng_status_t eng_cuda_malloc(int device, size_t nbytes, eng_stream_t stream, void **out);
void eng_cuda_free(int device, void *ptr);
eng_status_t eng_cuda_empty_cache(int device);

typedef struct {
  size_t allocated;        /* bytes in live blocks */
  size_t reserved;         /* bytes held from cudaMalloc (live + cached) */
  size_t peak_allocated;   /* high-water mark of `allocated` since the last reset */
  size_t device_free;      /* cudaMemGetInfo free bytes */
  size_t device_total;
  uint64_t n_alloc;        /* eng_cuda_malloc calls */
  uint64_t n_cache_hit;    /* served from the cache */
  uint64_t n_segment;      /* cudaMalloc calls */
  uint64_t n_oom_retry;    /* times the cache was flushed to retry */
} eng_cuda_mem_stats_t;
eng_status_t eng_cuda_memory_stats(int device, eng_cuda_mem_stats_t *out);
void eng_cuda_reset_peak(int device);
/* Called (with `user`) before the allocator retries after a failed cudaMalloc. */
void eng_cuda_set_oom_hook(void (*fn)(void *user), void *user);
/* Live device bytes over all devices (the binding paces the Lua GC with it, like CPU bytes). */
size_t eng_cuda_bytes_live(void);

/* ---- copies between host and device (synchronous with respect to the host; pageable host
 * memory goes through a pinned staging buffer in chunks) ---- */
eng_status_t eng_cuda_copy_h2d(int device, void *dst, const void *src, size_t nbytes, eng_stream_t s);
eng_status_t eng_cuda_copy_d2h(int device, void *dst, const void *src, size_t nbytes, eng_stream_t s);

/* ---- graphs ----
 * eng_cuda_graph_begin makes a capture stream current on `device` and routes allocations to a
 * private pool owned by the graph (so replays never touch memory that was handed out again).
 * Between begin and end only device work may be issued (no host copies, no synchronize). */
typedef struct eng_cuda_graph eng_cuda_graph_t;
eng_status_t eng_cuda_graph_begin(int device, eng_cuda_graph_t **out);
/* Ends capture and instantiates; on error the graph is freed and *g is set to NULL. */
eng_status_t eng_cuda_graph_end(eng_cuda_graph_t **g);
eng_status_t eng_cuda_graph_replay(eng_cuda_graph_t *g);
void eng_cuda_graph_free(eng_cuda_graph_t *g);
int eng_cuda_is_capturing(int device);

/* ---- NVTX: every op dispatch opens a range named after the op when enabled (default on) ---- */
void eng_cuda_nvtx_enable(int on);

#ifdef __cplusplus
}
#endif
#endif
