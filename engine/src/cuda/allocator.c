/* The caching allocator (eng_cuda.h). cudaMalloc and cudaFree are slow and cudaFree synchronizes
 * the device, so device memory is taken in segments and kept: a freed block goes back to a free list
 * and serves later requests.
 *
 * Sizes (the scheme of PyTorch's allocator):
 *   every request is rounded up to a multiple of 512 B (0 B gets 512 B, so every pointer is unique);
 *   small pool: requests up to 1 MiB, carved from 2 MiB segments;
 *   large pool: larger requests; a new segment is the request rounded up to 2 MiB.
 * A request takes the smallest cached block that fits (best fit) from the free list of its pool,
 * its stream and its size class. When the block is larger, the rest is split off as a free block if
 * it is worth keeping (>= 512 B in the small pool, >= 1 MiB in the large pool); otherwise the whole
 * block is handed out and counted as allocated. A freed block merges with its free neighbours of the
 * same segment.
 *
 * Streams: a free list holds the blocks of one stream, and a block is reused only by requests on the
 * stream it was allocated for, so stream order guarantees that the previous user's kernels are done
 * with it. A block used on another stream must be kept alive by the caller until that work is done.
 *
 * Pools: each device has one eager pool. A graph being captured has a private pool (graph.c): while
 * a thread captures on a device, its allocations there come from that pool, whose blocks are never
 * handed to eager code, so replays of the graph may keep writing them. cudaFree is never called on a
 * device while a capture is underway on it (it synchronizes, which would invalidate the capture).
 *
 * One mutex guards everything; the OOM hook is called without it (it frees memory, which locks). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_internal.h"

#define ROUND ((size_t)512)
#define SMALL_MAX ((size_t)1 << 20)
#define SMALL_SEGMENT ((size_t)2 << 20)
#define LARGE_SEGMENT_ROUND ((size_t)2 << 20)
#define SMALL_SPLIT_MIN ROUND
#define LARGE_SPLIT_MIN ((size_t)1 << 20)
/* Requests beyond this are refused without asking CUDA (it also keeps the rounding from
 * overflowing); no device comes close. */
#define MAX_REQUEST ((size_t)1 << 60)

typedef struct block block_t;
typedef struct bin bin_t;

struct block {
  char *ptr;
  size_t size;
  int allocated;
  bin_t *bin;                     /* the free list it belongs to (pool, stream, size class) */
  block_t *prev, *next;           /* address-order neighbours in its segment */
  block_t *free_prev, *free_next; /* in bin's free list, while free */
  block_t *hash_next;             /* in the live-block table, while allocated */
};

/* A free list: the free blocks of one pool, stream and size class, sorted by (size, address). */
struct bin {
  eng_cuda_pool_t *pool;
  cudaStream_t stream;
  int large;
  block_t *free;
  bin_t *next;
};

struct eng_cuda_pool {
  int device;
  int orphaned;          /* a private pool whose graph is gone */
  size_t n_live;         /* allocated blocks */
  bin_t *bins;
  eng_cuda_pool_t *next; /* in its device's list of orphaned pools */
};

typedef struct {
  eng_cuda_pool_t eager;
  eng_cuda_pool_t *orphans; /* private pools kept alive by their live blocks */
  int captures;             /* graph captures underway on the device (all threads) */
  size_t allocated, reserved, peak;
  uint64_t n_alloc, n_cache_hit, n_segment, n_oom_retry;
} device_state_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static device_state_t devices[ENG_CUDA_MAX_DEVICES];
static size_t bytes_live; /* sum of `allocated` over devices; read without the lock */
static void (*oom_hook)(void *user);
static void *oom_user;
static _Thread_local eng_cuda_pool_t *capture_pools[ENG_CUDA_MAX_DEVICES];
static _Thread_local int in_oom_hook;

static device_state_t *device_state(int device) {
  device_state_t *ds = &devices[device];
  ds->eager.device = device;
  return ds;
}

/* ---- the live-block table: pointer -> block, chained, power-of-two buckets ---- */

static block_t **table;
static size_t table_cap, table_count;

static size_t bucket(const void *p, size_t cap) {
  uint64_t x = ((uint64_t)(uintptr_t)p >> 9) * 0x9E3779B97F4A7C15ull;
  return (size_t)(x >> 32) & (cap - 1);
}

/* Grows the table when it is full; a failed growth only makes chains longer. */
static int table_insert(block_t *b) {
  if (table_count >= table_cap) {
    size_t cap = table_cap ? table_cap * 2 : 1024;
    block_t **t = calloc(cap, sizeof *t);
    if (t) {
      for (size_t i = 0; i < table_cap; i++) {
        for (block_t *x = table[i], *nx; x; x = nx) {
          nx = x->hash_next;
          size_t k = bucket(x->ptr, cap);
          x->hash_next = t[k];
          t[k] = x;
        }
      }
      free(table);
      table = t;
      table_cap = cap;
    } else if (!table) {
      return 0;
    }
  }
  size_t k = bucket(b->ptr, table_cap);
  b->hash_next = table[k];
  table[k] = b;
  table_count++;
  return 1;
}

static block_t *table_remove(const void *p) {
  if (!table) return NULL;
  for (block_t **pp = &table[bucket(p, table_cap)]; *pp; pp = &(*pp)->hash_next) {
    if ((*pp)->ptr == p) {
      block_t *b = *pp;
      *pp = b->hash_next;
      b->hash_next = NULL;
      table_count--;
      return b;
    }
  }
  return NULL;
}

/* ---- free lists ---- */

static int before(const block_t *a, const block_t *b) {
  return a->size < b->size || (a->size == b->size && a->ptr < b->ptr);
}

static void free_insert(block_t *b) {
  block_t **pp = &b->bin->free, *prev = NULL;
  while (*pp && before(*pp, b)) {
    prev = *pp;
    pp = &(*pp)->free_next;
  }
  b->free_prev = prev;
  b->free_next = *pp;
  if (*pp) (*pp)->free_prev = b;
  *pp = b;
}

static void free_remove(block_t *b) {
  if (b->free_prev)
    b->free_prev->free_next = b->free_next;
  else
    b->bin->free = b->free_next;
  if (b->free_next) b->free_next->free_prev = b->free_prev;
  b->free_prev = b->free_next = NULL;
}

static block_t *best_fit(bin_t *bin, size_t size) {
  for (block_t *b = bin->free; b; b = b->free_next)
    if (b->size >= size) return b;
  return NULL;
}

/* The bin of (pool, stream, size class), made on first use; NULL when out of host memory. */
static bin_t *bin_for(eng_cuda_pool_t *pool, cudaStream_t stream, int large) {
  for (bin_t *b = pool->bins; b; b = b->next)
    if (b->stream == stream && b->large == large) return b;
  bin_t *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  *b = (bin_t){.pool = pool, .stream = stream, .large = large, .next = pool->bins};
  pool->bins = b;
  return b;
}

/* ---- segments ---- */

/* A new segment for a request of `size` in bin, as one free block (not in the free list). When the
 * device is out of memory, sets *oom and returns ENG_ERR_OOM without a message (the caller retries,
 * then words the error). */
static eng_status_t segment_new(device_state_t *ds, bin_t *bin, size_t size, block_t **out, int *oom) {
  size_t seg = bin->large ? (size + LARGE_SEGMENT_ROUND - 1) / LARGE_SEGMENT_ROUND * LARGE_SEGMENT_ROUND
                          : SMALL_SEGMENT;
  block_t *b = calloc(1, sizeof *b);
  if (!b) return eng_error(ENG_ERR_OOM, "cuda: out of host memory for the allocator's records");
  void *p = NULL;
  cudaError_t err = cudaMalloc(&p, seg);
  if (err) {
    free(b);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      *oom = 1;
      return ENG_ERR_OOM;
    }
    return eng_cuda_error(err, "cudaMalloc");
  }
  b->ptr = p;
  b->size = seg;
  b->bin = bin;
  ds->reserved += seg;
  ds->n_segment++;
  *out = b;
  return ENG_OK;
}

/* cudaFree on the segment's device, leaving the caller's current device as it was (a free may
 * happen in the middle of an op on another device). */
static void segment_free(int device, void *ptr) {
  int prev = -1;
  cudaGetDevice(&prev);
  if (prev != device) cudaSetDevice(device);
  cudaFree(ptr);
  if (prev >= 0 && prev != device) cudaSetDevice(prev);
  cudaGetLastError(); /* a failed free leaves nothing to retry: the record goes regardless */
}

/* Frees the whole-segment free blocks of pool. */
static void pool_trim(device_state_t *ds, eng_cuda_pool_t *pool) {
  for (bin_t *bin = pool->bins; bin; bin = bin->next) {
    for (block_t *b = bin->free, *nx; b; b = nx) {
      nx = b->free_next;
      if (b->prev || b->next) continue; /* part of a segment that has live blocks */
      free_remove(b);
      segment_free(pool->device, b->ptr);
      ds->reserved -= b->size;
      free(b);
    }
  }
}

static void pool_destroy(eng_cuda_pool_t *pool) {
  for (bin_t *b = pool->bins, *nx; b; b = nx) {
    nx = b->next;
    free(b);
  }
  free(pool);
}

/* Trims an orphaned pool, and destroys it once no block of it is left. */
static void orphan_sweep(device_state_t *ds, eng_cuda_pool_t *pool) {
  pool_trim(ds, pool);
  if (pool->n_live) return;
  eng_cuda_pool_t **pp = &ds->orphans;
  while (*pp != pool) pp = &(*pp)->next;
  *pp = pool->next;
  pool_destroy(pool);
}

/* Frees every cached segment that holds no live block: the eager pool's and the orphaned pools'.
 * Must not run while a capture is underway on the device. */
static void release_cached(device_state_t *ds) {
  pool_trim(ds, &ds->eager);
  for (eng_cuda_pool_t *p = ds->orphans, *nx; p; p = nx) {
    nx = p->next;
    orphan_sweep(ds, p);
  }
}

/* ---- malloc and free ---- */

/* Merges free b with its free neighbours; returns the merged block (not in a free list). */
static block_t *merge(block_t *b) {
  block_t *n = b->next;
  if (n && !n->allocated) {
    free_remove(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    free(n);
  }
  block_t *p = b->prev;
  if (p && !p->allocated) {
    free_remove(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    free(b);
    b = p;
  }
  return b;
}

/* Takes b (free, not in a free list) for a request of `size`: splits off the rest when it is worth
 * keeping, records b as live. Returns 0 when out of host memory (b is back in its free list). */
static int take(device_state_t *ds, block_t *b, size_t size) {
  size_t rest = b->size - size;
  if (rest >= (b->bin->large ? LARGE_SPLIT_MIN : SMALL_SPLIT_MIN)) {
    block_t *r = calloc(1, sizeof *r);
    if (r) { /* without it, b is handed out whole */
      *r = (block_t){.ptr = b->ptr + size, .size = rest, .bin = b->bin, .prev = b, .next = b->next};
      if (b->next) b->next->prev = r;
      b->next = r;
      b->size = size;
      free_insert(r);
    }
  }
  b->allocated = 1;
  if (!table_insert(b)) {
    b->allocated = 0;
    free_insert(merge(b));
    return 0;
  }
  b->bin->pool->n_live++;
  ds->allocated += b->size;
  if (ds->allocated > ds->peak) ds->peak = ds->allocated;
  __atomic_fetch_add(&bytes_live, b->size, __ATOMIC_RELAXED);
  return 1;
}

/* "1.00 PiB", "512 MiB", "76.3 GiB": three significant digits. */
static const char *fmt_bytes(size_t n, char *buf, size_t cap) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = (double)n;
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    u++;
  }
  if (u == 0)
    snprintf(buf, cap, "%zu B", n);
  else
    snprintf(buf, cap, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

static eng_status_t oom_error(int device, size_t nbytes) {
  pthread_mutex_lock(&lock);
  size_t allocated = devices[device].allocated, reserved = devices[device].reserved;
  pthread_mutex_unlock(&lock);
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b)) cudaGetLastError();
  char a[32], b[32], c[32], d[32], e[32];
  return eng_error(ENG_ERR_OOM,
                   "cuda:%d: out of memory allocating %s (allocated %s, cached %s, free on device "
                   "%s of %s)",
                   device, fmt_bytes(nbytes, a, sizeof a), fmt_bytes(allocated, b, sizeof b),
                   fmt_bytes(reserved - allocated, c, sizeof c), fmt_bytes(free_b, d, sizeof d),
                   fmt_bytes(total_b, e, sizeof e));
}

/* One attempt under the lock: a cached block, else a new segment (*oom set when the device is out of
 * memory). */
static eng_status_t try_alloc(device_state_t *ds, bin_t *bin, size_t size, block_t **out, int *oom) {
  block_t *b = best_fit(bin, size);
  if (b) {
    free_remove(b);
    ds->n_cache_hit++;
  } else {
    eng_status_t st = segment_new(ds, bin, size, &b, oom);
    if (st) return st;
  }
  if (!take(ds, b, size)) return eng_error(ENG_ERR_OOM, "cuda: out of host memory for the allocator's records");
  *out = b;
  return ENG_OK;
}

eng_status_t eng_cuda_malloc(int device, size_t nbytes, eng_stream_t stream, void **out) {
  eng_status_t st = eng_cuda_select(device);
  cudaStream_t s = (cudaStream_t)stream;
  if (!st && !s) st = eng_cuda_stream_of(device, &s);
  if (st) return st;
  if (nbytes > MAX_REQUEST) return oom_error(device, nbytes);
  size_t size = nbytes ? (nbytes + ROUND - 1) / ROUND * ROUND : ROUND;

  pthread_mutex_lock(&lock);
  device_state_t *ds = device_state(device);
  eng_cuda_pool_t *pool = capture_pools[device] ? capture_pools[device] : &ds->eager;
  ds->n_alloc++;
  bin_t *bin = bin_for(pool, s, size > SMALL_MAX);
  block_t *b = NULL;
  int oom = 0;
  st = bin ? try_alloc(ds, bin, size, &b, &oom)
           : eng_error(ENG_ERR_OOM, "cuda: out of host memory for the allocator's records");
  if (oom) {
    /* Out of device memory: let the hook free what the program no longer uses (the Lua GC), give
     * the cached segments back to CUDA, and try once more. */
    ds->n_oom_retry++;
    void (*hook)(void *) = oom_hook;
    void *user = oom_user;
    pthread_mutex_unlock(&lock);
    if (hook && !in_oom_hook) {
      in_oom_hook = 1;
      hook(user);
      in_oom_hook = 0;
      eng_cuda_select(device); /* the hook's finalizers may have worked on another device */
    }
    pthread_mutex_lock(&lock);
    if (ds->captures == 0) release_cached(ds);
    oom = 0;
    st = try_alloc(ds, bin, size, &b, &oom);
  }
  pthread_mutex_unlock(&lock);
  if (oom) return oom_error(device, nbytes);
  if (st) return st;
  *out = b->ptr;
  return ENG_OK;
}

void eng_cuda_free(int device, void *ptr) {
  (void)device; /* the block knows its device: pointers are unique across devices */
  if (!ptr) return;
  pthread_mutex_lock(&lock);
  block_t *b = table_remove(ptr);
  if (b) {
    eng_cuda_pool_t *pool = b->bin->pool;
    device_state_t *ds = device_state(pool->device);
    ds->allocated -= b->size;
    __atomic_fetch_sub(&bytes_live, b->size, __ATOMIC_RELAXED);
    pool->n_live--;
    b->allocated = 0;
    free_insert(merge(b));
    if (pool->orphaned && ds->captures == 0) orphan_sweep(ds, pool);
  }
  pthread_mutex_unlock(&lock);
}

eng_status_t eng_cuda_empty_cache(int device) {
  eng_status_t st = eng_cuda_select(device);
  if (st) return st;
  pthread_mutex_lock(&lock);
  device_state_t *ds = device_state(device);
  int busy = ds->captures > 0;
  if (!busy) release_cached(ds);
  pthread_mutex_unlock(&lock);
  if (busy)
    return eng_error(ENG_ERR_DEVICE, "cuda: cannot empty the cache of cuda:%d while a graph is being captured on it",
                     device);
  return ENG_OK;
}

eng_status_t eng_cuda_memory_stats(int device, eng_cuda_mem_stats_t *out) {
  eng_status_t st = eng_cuda_select(device);
  if (st) return st;
  pthread_mutex_lock(&lock);
  const device_state_t *ds = device_state(device);
  *out = (eng_cuda_mem_stats_t){.allocated = ds->allocated,
                                .reserved = ds->reserved,
                                .peak_allocated = ds->peak,
                                .n_alloc = ds->n_alloc,
                                .n_cache_hit = ds->n_cache_hit,
                                .n_segment = ds->n_segment,
                                .n_oom_retry = ds->n_oom_retry};
  pthread_mutex_unlock(&lock);
  cudaError_t err = cudaMemGetInfo(&out->device_free, &out->device_total);
  return err ? eng_cuda_error(err, "cudaMemGetInfo") : ENG_OK;
}

void eng_cuda_reset_peak(int device) {
  if (eng_cuda_check_device(device)) return;
  pthread_mutex_lock(&lock);
  device_state_t *ds = device_state(device);
  ds->peak = ds->allocated;
  pthread_mutex_unlock(&lock);
}

void eng_cuda_set_oom_hook(void (*fn)(void *user), void *user) {
  pthread_mutex_lock(&lock);
  oom_hook = fn;
  oom_user = user;
  pthread_mutex_unlock(&lock);
}

size_t eng_cuda_bytes_live(void) { return __atomic_load_n(&bytes_live, __ATOMIC_RELAXED); }

/* ---- private pools and capture routing ---- */

eng_cuda_pool_t *eng_cuda_pool_new(int device) {
  eng_cuda_pool_t *p = calloc(1, sizeof *p);
  if (p) p->device = device;
  return p;
}

void eng_cuda_pool_release(eng_cuda_pool_t *pool) {
  if (!pool) return;
  pthread_mutex_lock(&lock);
  device_state_t *ds = device_state(pool->device);
  pool->orphaned = 1;
  pool->next = ds->orphans;
  ds->orphans = pool;
  if (ds->captures == 0) orphan_sweep(ds, pool);
  pthread_mutex_unlock(&lock);
}

void eng_cuda_capture_begin(int device, eng_cuda_pool_t *pool) {
  pthread_mutex_lock(&lock);
  if (!capture_pools[device]) device_state(device)->captures++;
  capture_pools[device] = pool;
  pthread_mutex_unlock(&lock);
}

void eng_cuda_capture_end(int device) {
  pthread_mutex_lock(&lock);
  if (capture_pools[device]) device_state(device)->captures--;
  capture_pools[device] = NULL;
  pthread_mutex_unlock(&lock);
}

eng_cuda_pool_t *eng_cuda_capture_pool(int device) {
  return device >= 0 && device < ENG_CUDA_MAX_DEVICES ? capture_pools[device] : NULL;
}
