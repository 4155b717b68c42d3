/* The profiler's GPU backend: CUPTI's activity API records every kernel (demangled name, start/end,
 * stream, grid, block, registers, shared memory), memcpy and memset, and the runtime and driver API
 * calls. While an op runs, its seq is pushed as CUPTI's external correlation id, so each API record
 * (and through its correlation id each kernel, copy and set) names the op that launched it.
 * GPU timestamps come on the recorder's CLOCK_MONOTONIC clock, so CPU and GPU spans line up.
 *
 * Nothing here calls CUPTI unless a GPU is present and a CUDA profile was asked for. */
#include "profile/profile_internal.h"

#ifdef ENG_HAVE_CUDA
#include <cupti.h>
#include <pthread.h>
#include <string.h>

#include "eng_cuda.h"

/* libstdc++'s demangler (the CUDA build links libstdc++ through the CUDA libraries). */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

#define BUFFER_BYTES ((size_t)8 << 20)
#define NAME_SLOTS_MIN 256

typedef struct {
  uint32_t correlation, op;
} link_t;

typedef struct {
  const char *key; /* CUPTI's pointer, shared by all records of one kernel */
  char *mangled;   /* a copy, so that a pointer CUPTI reuses for another kernel is told apart */
  char *name;      /* demangled */
} name_slot_t;

static struct {
  pthread_mutex_t lock;
  eng_prof_kernel_t *kernels;
  size_t n_kernels, cap_kernels;
  eng_prof_copy_t *copies;
  size_t n_copies, cap_copies;
  eng_prof_api_t *apis;
  size_t n_apis, cap_apis;
  link_t *links;
  size_t n_links, cap_links;
  name_slot_t *names; /* open addressing on the mangled pointer */
  size_t n_names, cap_names;
  uint64_t dropped;
  int registered, own_clock;
  int64_t clock_offset; /* CUPTI's clock minus ours, when ours could not be installed */
} G = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const CUpti_ActivityKind kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,            CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};
#define N_KINDS (sizeof kinds / sizeof *kinds)

int eng_prof_gpu_available(void) { return eng_cuda_device_count() > 0; }

static eng_status_t cupti_error(const char *what, CUptiResult r) {
  const char *msg = NULL;
  cuptiGetResultString(r, &msg);
  return eng_error(ENG_ERR_DEVICE, "profile: CUPTI %s failed: %s", what, msg ? msg : "unknown error");
}

static uint64_t CUPTIAPI our_clock(void) { return eng_profile_now_ns(); }

static uint64_t to_ours(uint64_t t) { return t ? (uint64_t)((int64_t)t - G.clock_offset) : 0; }

/* ---- kernel names: demangled once per kernel ---- */

/* The slot holding key with this very text, else the empty slot where it goes. */
static size_t slot_of(const char *key, const char *text, size_t cap) {
  uintptr_t h = (uintptr_t)key;
  h ^= h >> 17;
  h *= 0x9E3779B97F4A7C15u;
  size_t i = (size_t)(h >> 7) & (cap - 1);
  while (G.names[i].key && !(G.names[i].key == key && strcmp(G.names[i].mangled, text) == 0))
    i = (i + 1) & (cap - 1);
  return i;
}

static int grow_names(void) {
  size_t cap = G.cap_names ? G.cap_names * 2 : NAME_SLOTS_MIN;
  name_slot_t *old = G.names;
  size_t old_cap = G.cap_names;
  G.names = calloc(cap, sizeof *G.names);
  if (!G.names) {
    G.names = old;
    return -1;
  }
  G.cap_names = cap;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].key) G.names[slot_of(old[i].key, old[i].mangled, cap)] = old[i];
  free(old);
  return 0;
}

static char *demangle(const char *mangled) {
  int status = -1;
  char *s = mangled[0] == '_' && mangled[1] == 'Z' ? __cxa_demangle(mangled, NULL, NULL, &status) : NULL;
  return status == 0 && s ? s : strdup(mangled);
}

/* The demangled name of a kernel (lock held); it lives until eng_prof_gpu_clear. */
static const char *kernel_name(const char *mangled) {
  if (!mangled) return "(unnamed kernel)";
  if ((G.n_names + 1) * 2 > G.cap_names && grow_names()) return "(kernel name: out of memory)";
  size_t i = slot_of(mangled, mangled, G.cap_names);
  if (!G.names[i].key) {
    char *copy = strdup(mangled), *name = demangle(mangled);
    if (!copy || !name) {
      free(copy);
      free(name);
      return "(kernel name: out of memory)";
    }
    G.names[i] = (name_slot_t){mangled, copy, name};
    G.n_names++;
  }
  return G.names[i].name;
}

/* ---- records ---- */

static const char *memcpy_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
  }
}

#define APPEND(arr, n, cap, first) \
  (eng_prof_reserve((void **)&G.arr, &G.cap, G.n + 1, sizeof *G.arr, first) ? NULL : &G.arr[G.n++])

static void take_kernel(const CUpti_ActivityKernel10 *k) {
  eng_prof_kernel_t *r = APPEND(kernels, n_kernels, cap_kernels, 4096);
  if (!r) return;
  r->name = kernel_name(k->name);
  r->t0 = to_ours(k->start);
  r->t1 = to_ours(k->end);
  r->correlation = k->correlationId;
  r->op = 0;
  r->stream = k->streamId;
  r->device = k->deviceId;
  r->grid[0] = k->gridX, r->grid[1] = k->gridY, r->grid[2] = k->gridZ;
  r->block[0] = k->blockX, r->block[1] = k->blockY, r->block[2] = k->blockZ;
  r->registers = k->registersPerThread;
  r->static_smem = k->staticSharedMemory;
  r->dynamic_smem = k->dynamicSharedMemory;
}

static void take_copy(const char *name, int kind, uint64_t t0, uint64_t t1, uint64_t bytes,
                      uint32_t corr, uint32_t stream, uint32_t device) {
  eng_prof_copy_t *r = APPEND(copies, n_copies, cap_copies, 1024);
  if (!r) return;
  *r = (eng_prof_copy_t){.name = name, .kind = kind, .t0 = to_ours(t0), .t1 = to_ours(t1),
                         .bytes = bytes, .correlation = corr, .stream = stream, .device = device};
}

static void take_api(const CUpti_ActivityAPI *a, int driver) {
  eng_prof_api_t *r = APPEND(apis, n_apis, cap_apis, 4096);
  if (!r) return;
  const char *name = NULL;
  cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid,
                       &name);
  *r = (eng_prof_api_t){.name = name ? name : (driver ? "driver call" : "runtime call"),
                        .t0 = to_ours(a->start), .t1 = to_ours(a->end),
                        .correlation = a->correlationId, .thread = (int32_t)a->threadId,
                        .driver = driver};
}

static void take(const CUpti_Activity *rec) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      take_kernel((const CUpti_ActivityKernel10 *)rec);
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
      take_copy(memcpy_name(m->copyKind), ENG_PROF_MEMCPY, m->start, m->end, m->bytes,
                m->correlationId, m->streamId, m->deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
      take_copy("memset", ENG_PROF_MEMSET, m->start, m->end, m->bytes, m->correlationId,
                m->streamId, m->deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      take_api((const CUpti_ActivityAPI *)rec, 0);
      break;
    case CUPTI_ACTIVITY_KIND_DRIVER:
      take_api((const CUpti_ActivityAPI *)rec, 1);
      break;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *)rec;
      if (x->externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) break;
      link_t *l = APPEND(links, n_links, cap_links, 4096);
      if (l) *l = (link_t){x->correlationId, (uint32_t)x->externalId};
      break;
    }
    default:
      break;
  }
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUFFER_BYTES);
  *size = *buffer ? BUFFER_BYTES : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
  (void)size;
  pthread_mutex_lock(&G.lock);
  CUpti_Activity *rec = NULL;
  while (valid && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) take(rec);
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
    G.dropped += dropped;
  pthread_mutex_unlock(&G.lock);
  free(buffer);
}

/* ---- session ---- */

eng_status_t eng_prof_gpu_start(void) {
  CUptiResult r;
  if (!G.registered) {
    /* Once per process, before any kind is enabled (CUPTI's rule for the clock). */
    cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    G.own_clock = cuptiActivityRegisterTimestampCallback(our_clock) == CUPTI_SUCCESS;
    if ((r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS)
      return cupti_error("cuptiActivityRegisterCallbacks", r);
    G.registered = 1;
  }
  G.clock_offset = 0;
  uint64_t theirs;
  if (!G.own_clock && cuptiGetTimestamp(&theirs) == CUPTI_SUCCESS)
    G.clock_offset = (int64_t)theirs - (int64_t)eng_profile_now_ns();
  for (size_t i = 0; i < N_KINDS; i++) {
    if ((r = cuptiActivityEnable(kinds[i])) != CUPTI_SUCCESS) {
      while (i--) cuptiActivityDisable(kinds[i]);
      return cupti_error("cuptiActivityEnable", r);
    }
  }
  return ENG_OK;
}

static int by_correlation(const void *a, const void *b) {
  uint32_t x = ((const link_t *)a)->correlation, y = ((const link_t *)b)->correlation;
  return (x > y) - (x < y);
}

static uint32_t op_of(uint32_t corr) {
  link_t key = {corr, 0};
  const link_t *l = bsearch(&key, G.links, G.n_links, sizeof *G.links, by_correlation);
  return l ? l->op : 0;
}

void eng_prof_gpu_stop(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (size_t i = 0; i < N_KINDS; i++) cuptiActivityDisable(kinds[i]);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  pthread_mutex_lock(&G.lock);
  qsort(G.links, G.n_links, sizeof *G.links, by_correlation);
  for (size_t i = 0; i < G.n_kernels; i++) G.kernels[i].op = op_of(G.kernels[i].correlation);
  for (size_t i = 0; i < G.n_copies; i++) G.copies[i].op = op_of(G.copies[i].correlation);
  for (size_t i = 0; i < G.n_apis; i++) G.apis[i].op = op_of(G.apis[i].correlation);
  pthread_mutex_unlock(&G.lock);
}

void eng_prof_gpu_push(uint32_t seq) {
  cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, seq);
}

void eng_prof_gpu_pop(void) {
  uint64_t last;
  cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

void eng_prof_gpu_data(eng_profile_data_t *d) {
  pthread_mutex_lock(&G.lock);
  d->kernels = G.kernels;
  d->n_kernels = G.n_kernels;
  d->copies = G.copies;
  d->n_copies = G.n_copies;
  d->apis = G.apis;
  d->n_apis = G.n_apis;
  d->dropped = G.dropped;
  pthread_mutex_unlock(&G.lock);
}

void eng_prof_gpu_clear(void) {
  pthread_mutex_lock(&G.lock);
  free(G.kernels);
  free(G.copies);
  free(G.apis);
  free(G.links);
  for (size_t i = 0; i < G.cap_names; i++) {
    free(G.names[i].mangled);
    free(G.names[i].name);
  }
  free(G.names);
  G.kernels = NULL, G.copies = NULL, G.apis = NULL, G.links = NULL, G.names = NULL;
  G.n_kernels = G.cap_kernels = G.n_copies = G.cap_copies = G.n_apis = G.cap_apis = 0;
  G.n_links = G.cap_links = G.n_names = G.cap_names = 0;
  G.dropped = 0;
  pthread_mutex_unlock(&G.lock);
}

#else /* a build without CUDA: no GPU activity to record */

int eng_prof_gpu_available(void) { return 0; }
eng_status_t eng_prof_gpu_start(void) {
  return eng_error(ENG_ERR_DEVICE, "profile: this engine was built without CUDA");
}
void eng_prof_gpu_stop(void) {}
void eng_prof_gpu_push(uint32_t seq) { (void)seq; }
void eng_prof_gpu_pop(void) {}
void eng_prof_gpu_data(eng_profile_data_t *d) { (void)d; }
void eng_prof_gpu_clear(void) {}

#endif
