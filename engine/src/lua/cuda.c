/* engine.cuda: GPUs and device memory from Lua (the C side is eng_cuda.h); streams, events and
 * graphs are in cuda_objects.c. Without CUDA or without a GPU, is_available() is false,
 * device_count() is 0 and the other functions raise the runtime's "cuda: ..." message.
 *
 * The allocator's OOM hook lives here too: the Lua GC cannot see device memory, so when a
 * cudaMalloc fails the hook runs a full collection of the engine states, whose unreachable tensors
 * then give their blocks back. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

#include "eng_cuda.h"
#include "lua/lua_internal.h"

int lt_cuda_fail(lua_State *L) { return lt_raise(L, "%s", eng_last_error()); }

int lt_cuda_device_arg(lua_State *L, int idx, const char *op) {
  int dev = 0;
  if (lua_type(L, idx) == LUA_TSTRING) {
    const char *name = lua_tostring(L, idx);
    eng_device_t d;
    if (eng_device_parse(name, &d) != ENG_OK) return lt_fail(L, op);
    if (d.type != ENG_DEV_CUDA)
      return lt_raise(L, "%s: argument %d must be a CUDA device, got '%s'", op, idx, name);
    dev = d.index;
  } else if (!lua_isnoneornil(L, idx)) {
    if (lua_type(L, idx) != LUA_TNUMBER)
      return lt_type_error(L, idx, op, "a device index or \"cuda:N\"");
    int64_t i = lt_check_int(L, idx, op);
    dev = i < 0 || i > INT_MAX ? -1 : (int)i;
  }
  if (eng_cuda_check_device(dev) != ENG_OK) return lt_cuda_fail(L);
  return dev;
}

/* ---- the OOM hook: collect the states of the calling thread ---- */

typedef struct live_state {
  lua_State *L;
  pthread_t owner; /* the thread that opened it */
  struct live_state *next;
} live_state_t;

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static live_state_t *live_states;
static const char live_key = 'l'; /* registry: the state's sentinel userdata */
static const char thread_key = 't'; /* registry: the thread L (kept alive for the hook) */

/* Collects every state opened by this thread. Another thread's state may be running right now, so
 * it is left alone. The list is walked by position with the lock dropped around each collection:
 * a finalizer that opens or closes an engine must not deadlock or pull a node from under us. */
static void collect_garbage(void *user) {
  (void)user;
  pthread_t self = pthread_self();
  for (int k = 0;; k++) {
    lua_State *L = NULL;
    int i = 0;
    pthread_mutex_lock(&live_lock);
    for (live_state_t *s = live_states; s && !L; s = s->next)
      if (pthread_equal(s->owner, self) && i++ == k) L = s->L;
    pthread_mutex_unlock(&live_lock);
    if (!L) return;
    lua_gc(L, LUA_GCCOLLECT, 0);
  }
}

/* __gc of the sentinel: the state is closing. */
static int live_gc(lua_State *L) {
  live_state_t **box = (live_state_t **)lua_touserdata(L, 1);
  if (!box || !*box) return 0;
  pthread_mutex_lock(&live_lock);
  for (live_state_t **pp = &live_states; *pp; pp = &(*pp)->next) {
    if (*pp == *box) {
      *pp = (*box)->next;
      break;
    }
  }
  pthread_mutex_unlock(&live_lock);
  free(*box);
  *box = NULL;
  return 0;
}

/* Adds L to the live states until it closes (a sentinel in its registry unlinks it). */
static void register_state(lua_State *L) {
  live_state_t **box = (live_state_t **)lua_newuserdata(L, sizeof *box);
  *box = NULL;
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, live_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_pushlightuserdata(L, (void *)&live_key);
  lua_insert(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
  /* L may be a coroutine (require inside one): keep it from being collected. */
  lua_pushlightuserdata(L, (void *)&thread_key);
  lua_pushthread(L);
  lua_rawset(L, LUA_REGISTRYINDEX);

  live_state_t *s = (live_state_t *)malloc(sizeof *s);
  if (!s) luaL_error(L, "engine: out of memory");
  s->L = L;
  s->owner = pthread_self();
  pthread_mutex_lock(&live_lock);
  s->next = live_states;
  live_states = s;
  pthread_mutex_unlock(&live_lock);
  *box = s;
}

/* ---- devices ---- */

static int c_is_available(lua_State *L) {
  lua_pushboolean(L, eng_cuda_device_count() > 0);
  return 1;
}

static int c_device_count(lua_State *L) {
  lua_pushinteger(L, eng_cuda_device_count());
  return 1;
}

static void set_number(lua_State *L, const char *key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}

static int c_properties(lua_State *L) {
  int dev = lt_cuda_device_arg(L, 1, "cuda.properties");
  lt_no_more_args(L, 2, "cuda.properties");
  eng_cuda_props_t p;
  if (eng_cuda_properties(dev, &p) != ENG_OK) return lt_cuda_fail(L);
  lua_createtable(L, 0, 12);
  lua_pushstring(L, p.name);
  lua_setfield(L, -2, "name");
  set_number(L, "device", dev);
  set_number(L, "major", p.major);
  set_number(L, "minor", p.minor);
  set_number(L, "sm_count", p.sm_count);
  set_number(L, "total_memory", (double)p.total_memory);
  set_number(L, "l2_bytes", (double)p.l2_bytes);
  set_number(L, "smem_per_block_optin", (double)p.smem_per_block_optin);
  set_number(L, "max_threads_per_sm", p.max_threads_per_sm);
  set_number(L, "clock_khz", p.clock_khz);
  set_number(L, "memory_clock_khz", p.memory_clock_khz);
  set_number(L, "memory_bus_bits", p.memory_bus_bits);
  return 1;
}

static int c_synchronize(lua_State *L) {
  int dev = lt_cuda_device_arg(L, 1, "cuda.synchronize");
  lt_no_more_args(L, 2, "cuda.synchronize");
  if (eng_cuda_synchronize(dev) != ENG_OK) return lt_cuda_fail(L);
  return 0;
}

/* ---- memory ---- */

static eng_cuda_mem_stats_t stats_arg(lua_State *L, const char *op) {
  int dev = lt_cuda_device_arg(L, 1, op);
  lt_no_more_args(L, 2, op);
  eng_cuda_mem_stats_t s;
  if (eng_cuda_memory_stats(dev, &s) != ENG_OK) lt_cuda_fail(L);
  return s;
}

static int c_memory_stats(lua_State *L) {
  eng_cuda_mem_stats_t s = stats_arg(L, "cuda.memory_stats");
  lua_createtable(L, 0, 9);
  set_number(L, "allocated", (double)s.allocated);
  set_number(L, "reserved", (double)s.reserved);
  set_number(L, "peak_allocated", (double)s.peak_allocated);
  set_number(L, "device_free", (double)s.device_free);
  set_number(L, "device_total", (double)s.device_total);
  set_number(L, "n_alloc", (double)s.n_alloc);
  set_number(L, "n_cache_hit", (double)s.n_cache_hit);
  set_number(L, "n_segment", (double)s.n_segment);
  set_number(L, "n_oom_retry", (double)s.n_oom_retry);
  return 1;
}

static int c_memory_allocated(lua_State *L) {
  lua_pushnumber(L, (double)stats_arg(L, "cuda.memory_allocated").allocated);
  return 1;
}

static int c_max_memory_allocated(lua_State *L) {
  lua_pushnumber(L, (double)stats_arg(L, "cuda.max_memory_allocated").peak_allocated);
  return 1;
}

static int c_reset_peak(lua_State *L) {
  int dev = lt_cuda_device_arg(L, 1, "cuda.reset_peak_memory_stats");
  lt_no_more_args(L, 2, "cuda.reset_peak_memory_stats");
  eng_cuda_reset_peak(dev);
  return 0;
}

static int c_empty_cache(lua_State *L) {
  int dev = lt_cuda_device_arg(L, 1, "cuda.empty_cache");
  lt_no_more_args(L, 2, "cuda.empty_cache");
  lua_gc(L, LUA_GCCOLLECT, 0); /* unreachable tensors first, so their blocks can go too */
  if (eng_cuda_empty_cache(dev) != ENG_OK) return lt_cuda_fail(L);
  return 0;
}

static int c_nvtx(lua_State *L) {
  if (lua_type(L, 1) != LUA_TBOOLEAN) return lt_type_error(L, 1, "cuda.nvtx", "a boolean");
  eng_cuda_nvtx_enable(lua_toboolean(L, 1));
  return 0;
}

#define DEV "device: an index (default 0) or \"cuda:N\". "

static const lt_reg_t cuda_regs[] = {
    {"is_available", c_is_available, "engine.cuda.is_available()",
     "true when this engine has CUDA and sees at least one GPU.", NULL},
    {"device_count", c_device_count, "engine.cuda.device_count()",
     "The number of GPUs (0 without CUDA or without a GPU).", NULL},
    {"properties", c_properties, "engine.cuda.properties([device])",
     "A table describing a GPU: name, device, major and minor (compute capability), sm_count, "
     "total_memory and l2_bytes (bytes), smem_per_block_optin, max_threads_per_sm, clock_khz, "
     "memory_clock_khz, memory_bus_bits. " DEV,
     NULL},
    {"synchronize", c_synchronize, "engine.cuda.synchronize([device])",
     "Waits until all work queued on the GPU is done (use it before reading the wall clock). " DEV,
     NULL},
    {"memory_stats", c_memory_stats, "engine.cuda.memory_stats([device])",
     "The caching allocator's numbers: allocated (bytes in live tensors, rounded to blocks), "
     "reserved (bytes taken from CUDA: live + cached), peak_allocated (since the last reset), "
     "device_free and device_total (CUDA's view of the whole GPU), n_alloc, n_cache_hit, n_segment "
     "(cudaMalloc calls), n_oom_retry. " DEV,
     NULL},
    {"memory_allocated", c_memory_allocated, "engine.cuda.memory_allocated([device])",
     "Bytes held by live tensors (memory_stats().allocated). " DEV, NULL},
    {"max_memory_allocated", c_max_memory_allocated, "engine.cuda.max_memory_allocated([device])",
     "The peak of memory_allocated() since the last reset_peak_memory_stats(). " DEV, NULL},
    {"reset_peak_memory_stats", c_reset_peak, "engine.cuda.reset_peak_memory_stats([device])",
     "Starts a new peak: max_memory_allocated() becomes memory_allocated(). " DEV, NULL},
    {"empty_cache", c_empty_cache, "engine.cuda.empty_cache([device])",
     "Runs a full garbage collection, then gives the cached memory that no tensor uses back to "
     "CUDA (other processes can then use it; this engine's next allocations get slower). " DEV,
     NULL},
    {"nvtx", c_nvtx, "engine.cuda.nvtx(on)",
     "Switches the NVTX range that every op opens (named after the op, so Nsight Systems "
     "attributes kernels to ops). On by default; costs little when no profiler is attached.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_cuda(lua_State *L, int engine) {
  register_state(L);
  eng_cuda_set_oom_hook(collect_garbage, NULL);
  lua_newtable(L);
  int cuda = lua_gettop(L);
  lt_register(L, cuda, 0, cuda_regs);
  lt_open_cuda_objects(L, cuda);
  lt_doc_set(L, cuda,
             "engine.cuda\n\nGPUs: devices and their properties, the caching allocator's memory "
             "statistics, streams, events and CUDA graphs. Device memory comes from a caching "
             "allocator; when it runs out, the engine collects garbage, frees the cache and "
             "retries before failing.");
  lua_setfield(L, engine, "cuda");
}
