/* The kernel-level profiler's recorder (Lua-free). One session at a time per process:
 *
 *   eng_profile_start(&opts)  installs the registry's op hook (and, with opts.cuda, CUPTI activity
 *                             recording of kernels, memcpy/memset and runtime/driver API calls);
 *   ... run ops ...
 *   eng_profile_stop()        flushes CUPTI, removes the hook and links every GPU record to the op
 *                             that was running on the launching thread;
 *   eng_profile_data(&d)      the records, valid until the next start or eng_profile_clear().
 *
 * Per op: its static name, begin/end on one monotonic ns clock (CUPTI's GPU timestamps are put on
 * the same clock), a sequential id, the op it ran inside (nested dispatch), the OS thread, the
 * device, its inputs' dtypes and shapes (raw, formatted only on request), whether autograd was in
 * its backward pass, the phase (forward/backward/optimizer, marked by eng_profile_phase), and two
 * caller-defined site ids (the Lua binding puts the issuing Lua source lines there).
 *
 * The hot path takes no malloc beyond the amortised growth of preallocated arrays and formats no
 * strings. Without a GPU nothing of CUPTI is ever called. */
#ifndef ENG_PROFILE_H
#define ENG_PROFILE_H

#include "eng_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char *name;  /* the op's name (static) */
  uint64_t t0, t1;   /* ns on eng_profile_now_ns()'s clock; t1 = 0 if the op never returned */
  uint32_t seq;      /* 1, 2, ... in dispatch order within the session */
  uint32_t parent;   /* seq of the op this one was dispatched inside, 0 at top level */
  uint32_t site;     /* site ids given by opts.site (0: none) */
  uint32_t frame;
  uint32_t shape_off; /* where its inputs start in eng_profile_data_t.shapes */
  int32_t thread;     /* OS thread id */
  int16_t device;     /* -1: cpu, else the CUDA device index */
  uint8_t n_inputs;   /* inputs kept (at most ENG_PROF_MAX_INPUTS) */
  uint8_t backward;   /* autograd was running its backward pass */
  uint16_t phase;     /* index into eng_profile_data_t.phases */
} eng_prof_op_t;

#define ENG_PROF_MAX_INPUTS 10

typedef struct {
  const char *name;    /* demangled (cuBLAS internals included); lives as long as the data */
  uint64_t t0, t1;     /* ns, same clock as the ops */
  uint32_t correlation;
  uint32_t op;         /* seq of the op that launched it, 0 when launched outside any op */
  uint32_t stream, device;
  int32_t grid[3], block[3];
  int32_t registers;   /* per thread */
  int32_t static_smem, dynamic_smem; /* bytes per block */
} eng_prof_kernel_t;

typedef enum { ENG_PROF_MEMCPY = 0, ENG_PROF_MEMSET = 1 } eng_prof_copy_kind_t;

typedef struct {
  const char *name;    /* "memcpy HtoD", "memcpy DtoH", "memcpy DtoD", ..., "memset" (static) */
  int kind;            /* eng_prof_copy_kind_t */
  uint64_t t0, t1, bytes;
  uint32_t correlation, op, stream, device;
} eng_prof_copy_t;

typedef struct {
  const char *name;    /* the runtime/driver function, e.g. "cudaLaunchKernel" (static) */
  uint64_t t0, t1;
  uint32_t correlation, op;
  int32_t thread;      /* OS thread id */
  int driver;          /* a driver API call (cu*), else a runtime one (cuda*) */
} eng_prof_api_t;

typedef struct {
  char name[32];
  uint64_t t0, t1;
  int64_t peak_cpu;    /* high-water mark of CPU tensor bytes, sampled as each op returns */
  int64_t peak_cuda;   /* the CUDA allocator's peak_allocated over the phase (device 0); -1: none */
} eng_prof_phase_t;

/* Called at every op's begin on the dispatching thread: sets *site and *frame (any ids; the Lua
 * binding uses the first Lua line outside the engine's own Lua code, and the innermost Lua line). */
typedef void (*eng_prof_site_fn)(void *user, uint32_t *site, uint32_t *frame);

typedef struct {
  int cuda;                 /* record GPU activity through CUPTI (needs a GPU) */
  const char *first_phase;  /* name of the phase the session starts in; NULL: "forward" */
  int auto_backward;        /* autograd's backward pass is its own phase "backward" */
  eng_prof_site_fn site;    /* may be NULL */
  void *site_user;
} eng_profile_opts_t;

typedef struct {
  const eng_prof_op_t *ops;
  size_t n_ops;
  /* Per op from shape_off, n_inputs entries: a header h (-1: an absent optional input; else dtype
   * = h & 0xff, ndim = h >> 8) followed by ndim sizes. */
  const int64_t *shapes;
  const eng_prof_kernel_t *kernels;
  size_t n_kernels;
  const eng_prof_copy_t *copies;
  size_t n_copies;
  const eng_prof_api_t *apis;
  size_t n_apis;
  const eng_prof_phase_t *phases;
  size_t n_phases;
  uint64_t t0, t1;          /* session start and stop */
  uint64_t dropped;         /* GPU records CUPTI had to drop */
  int cuda;                 /* GPU activity was recorded */
} eng_profile_data_t;

/* Fails when a session is running, or opts->cuda is set and CUPTI is unusable (no GPU, a build
 * without CUDA, or CUPTI refused: the message says which). Clears the previous session's data. */
eng_status_t eng_profile_start(const eng_profile_opts_t *opts);
/* Ends the session (no-op status error when none runs). With CUDA, call it after synchronizing the
 * device so that every kernel has completed. */
eng_status_t eng_profile_stop(void);
int eng_profile_running(void);
/* Starts a new phase (ends the current one, recording its peak memory); naming the current phase
 * again changes nothing. Ignored when no session runs. Names longer than 31 bytes are cut. */
void eng_profile_phase(const char *name);
/* The recorder's clock: CLOCK_MONOTONIC in ns. */
uint64_t eng_profile_now_ns(void);
/* Whether GPU activity can be recorded here (a CUDA build with CUPTI and a GPU present). */
int eng_profile_cuda_available(void);

/* The last session's records (after eng_profile_stop; empty before any session). */
void eng_profile_data(eng_profile_data_t *out);
void eng_profile_clear(void);
/* Writes "f32[4,3], f32[3,5]" (absent optional inputs as "-") for op into buf; returns buf. */
const char *eng_profile_op_inputs(const eng_profile_data_t *d, const eng_prof_op_t *op, char *buf,
                                  size_t n);

#ifdef __cplusplus
}
#endif
#endif
