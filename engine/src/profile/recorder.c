/* The op recorder: the registry's op hook appends one record per dispatched op (name, times,
 * thread, device, inputs, nesting, phase, call site) to preallocated growable arrays, and the
 * session start/stop that installs it together with the GPU backend. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "eng_autograd.h"
#include "eng_cuda.h"
#include "eng_registry.h"
#include "profile/profile_internal.h"

/* Deeper nesting than this is timed only down to this depth (dispatch never nests that deep). */
#define MAX_DEPTH 32
#define NO_RECORD UINT32_MAX
#define FIRST_OPS 16384
#define MAX_PHASES 65535

static struct {
  pthread_mutex_t lock;
  int running, cuda, auto_backward;
  uint32_t generation; /* bumped per session: per-thread stacks of an older one are stale */
  eng_prof_site_fn site;
  void *site_user;
  eng_prof_op_t *ops;
  size_t n_ops, cap_ops;
  int64_t *shapes;
  size_t n_shapes, cap_shapes;
  eng_prof_phase_t *phases;
  size_t n_phases, cap_phases;
  int in_backward;         /* what the last op saw of autograd */
  char resume_phase[32];   /* the phase the backward pass interrupted */
  uint64_t t0, t1;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The ops open on this thread (record index and seq per nesting level). */
static _Thread_local struct {
  uint32_t generation;
  int depth;
  uint32_t idx[MAX_DEPTH], seq[MAX_DEPTH];
  int32_t tid;
} T;

uint64_t eng_profile_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int eng_profile_running(void) { return __atomic_load_n(&S.running, __ATOMIC_RELAXED); }

int eng_profile_cuda_available(void) { return eng_prof_gpu_available(); }

static int32_t thread_id(void) {
  if (!T.tid) T.tid = (int32_t)syscall(SYS_gettid);
  return T.tid;
}

/* Ends the current phase at t, reading (and resetting) the CUDA allocator's peak. Lock held. */
static void phase_close_locked(uint64_t t) {
  eng_prof_phase_t *cur = &S.phases[S.n_phases - 1];
  cur->t1 = t;
  eng_cuda_mem_stats_t st;
  if (S.cuda && eng_cuda_memory_stats(0, &st) == ENG_OK) {
    cur->peak_cuda = (int64_t)st.peak_allocated;
    eng_cuda_reset_peak(0);
  }
}

/* Ends the current phase and starts `name` at t. Lock held. Returns -1 when out of memory (the
 * current phase then goes on). */
static int phase_begin_locked(const char *name, uint64_t t) {
  if (S.n_phases >= MAX_PHASES ||
      eng_prof_reserve((void **)&S.phases, &S.cap_phases, S.n_phases + 1, sizeof *S.phases, 16))
    return -1;
  if (S.n_phases) phase_close_locked(t);
  eng_prof_phase_t *p = &S.phases[S.n_phases++];
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  p->t0 = t;
  p->peak_cpu = (int64_t)eng_cpu_bytes_live();
  p->peak_cuda = S.cuda ? 0 : -1;
  return 0;
}

/* With auto_backward, entering autograd's backward pass starts phase "backward" and leaving it
 * resumes the phase it interrupted. Lock held. */
static void follow_backward_locked(int backward) {
  if (!S.auto_backward || backward == S.in_backward) return;
  S.in_backward = backward;
  uint64_t t = eng_profile_now_ns();
  if (backward) {
    snprintf(S.resume_phase, sizeof S.resume_phase, "%s", S.phases[S.n_phases - 1].name);
    phase_begin_locked("backward", t);
  } else {
    phase_begin_locked(S.resume_phase, t);
  }
}

static eng_device_t op_device(const eng_op_call_t *call) {
  for (int k = 0; k < call->n_in; k++)
    if (call->in[k]) return call->in[k]->storage->device;
  return call->out[0] ? call->out[0]->storage->device : call->attrs.device;
}

/* Appends the op's inputs (header + sizes each) to the shape pool. Lock held; room reserved. */
static uint8_t push_inputs_locked(const eng_op_call_t *call) {
  int n = call->n_in < ENG_PROF_MAX_INPUTS ? call->n_in : ENG_PROF_MAX_INPUTS;
  for (int k = 0; k < n; k++) {
    const eng_tensor_t *t = call->in[k];
    if (!t) {
      S.shapes[S.n_shapes++] = -1;
      continue;
    }
    S.shapes[S.n_shapes++] = (int64_t)t->dtype | ((int64_t)t->ndim << 8);
    for (int d = 0; d < t->ndim; d++) S.shapes[S.n_shapes++] = t->shape[d];
  }
  return (uint8_t)n;
}

static void op_begin(const eng_op_call_t *call) {
  if (T.generation != S.generation) {
    T.generation = S.generation;
    T.depth = 0;
  }
  int d = T.depth++;
  if (d >= MAX_DEPTH) return;
  T.idx[d] = NO_RECORD;
  uint32_t site = 0, frame = 0;
  if (S.site) S.site(S.site_user, &site, &frame);
  int backward = eng_grad_in_backward() != 0;
  eng_device_t dev = op_device(call);
  int32_t tid = thread_id();

  pthread_mutex_lock(&S.lock);
  size_t shape_need = S.n_shapes + (size_t)ENG_PROF_MAX_INPUTS * (1 + ENG_MAX_DIMS);
  if (!S.running ||
      eng_prof_reserve((void **)&S.ops, &S.cap_ops, S.n_ops + 1, sizeof *S.ops, FIRST_OPS) ||
      eng_prof_reserve((void **)&S.shapes, &S.cap_shapes, shape_need, sizeof *S.shapes,
                       FIRST_OPS * 8)) {
    pthread_mutex_unlock(&S.lock);
    return; /* out of memory: this op goes unrecorded rather than failing */
  }
  follow_backward_locked(backward);
  uint32_t idx = (uint32_t)S.n_ops++;
  eng_prof_op_t *r = &S.ops[idx];
  r->name = eng_op_def(call->id)->name;
  r->seq = idx + 1;
  r->parent = d ? T.seq[d - 1] : 0;
  r->site = site;
  r->frame = frame;
  r->shape_off = (uint32_t)S.n_shapes;
  r->n_inputs = push_inputs_locked(call);
  r->thread = tid;
  r->device = dev.type == ENG_DEV_CUDA ? (int16_t)dev.index : -1;
  r->backward = (uint8_t)backward;
  r->phase = (uint16_t)(S.n_phases - 1);
  r->t1 = 0;
  T.idx[d] = idx;
  T.seq[d] = idx + 1;
  if (S.cuda) eng_prof_gpu_push(idx + 1);
  r->t0 = eng_profile_now_ns(); /* last: the op's time leaves out the recorder's own */
  pthread_mutex_unlock(&S.lock);
}

static void op_end(void) {
  uint64_t t1 = eng_profile_now_ns();
  if (T.generation != S.generation || T.depth == 0) return;
  int d = --T.depth;
  if (d >= MAX_DEPTH || T.idx[d] == NO_RECORD) return;
  pthread_mutex_lock(&S.lock);
  if (S.running && T.idx[d] < S.n_ops) {
    if (S.cuda) eng_prof_gpu_pop();
    S.ops[T.idx[d]].t1 = t1;
    int64_t live = (int64_t)eng_cpu_bytes_live();
    eng_prof_phase_t *p = &S.phases[S.n_phases - 1];
    if (live > p->peak_cpu) p->peak_cpu = live;
  }
  pthread_mutex_unlock(&S.lock);
}

static void hook(void *user, const eng_op_call_t *call, int begin) {
  (void)user;
  if (begin)
    op_begin(call);
  else
    op_end();
}

static void clear_locked(void) {
  free(S.ops);
  free(S.shapes);
  free(S.phases);
  S.ops = NULL;
  S.shapes = NULL;
  S.phases = NULL;
  S.n_ops = S.cap_ops = S.n_shapes = S.cap_shapes = S.n_phases = S.cap_phases = 0;
  S.t0 = S.t1 = 0;
  eng_prof_gpu_clear();
}

void eng_profile_clear(void) {
  pthread_mutex_lock(&S.lock);
  if (!S.running) clear_locked();
  pthread_mutex_unlock(&S.lock);
}

eng_status_t eng_profile_start(const eng_profile_opts_t *opts) {
  pthread_mutex_lock(&S.lock);
  if (S.running) {
    pthread_mutex_unlock(&S.lock);
    return eng_error(ENG_ERR_ARG, "profile: a profile is already running (profiles do not nest)");
  }
  clear_locked();
  if (opts->cuda) {
    eng_status_t st = eng_prof_gpu_available()
                          ? eng_prof_gpu_start()
                          : eng_error(ENG_ERR_DEVICE, "profile: cuda profiling needs a GPU, and "
                                                      "none was found");
    if (st) {
      pthread_mutex_unlock(&S.lock);
      return st;
    }
    eng_cuda_reset_peak(0);
  }
  S.cuda = opts->cuda != 0;
  S.auto_backward = opts->auto_backward != 0;
  S.site = opts->site;
  S.site_user = opts->site_user;
  S.in_backward = 0;
  S.generation++;
  S.t0 = eng_profile_now_ns();
  if (phase_begin_locked(opts->first_phase ? opts->first_phase : "forward", S.t0)) {
    pthread_mutex_unlock(&S.lock);
    if (S.cuda) eng_prof_gpu_stop();
    return eng_error(ENG_ERR_OOM, "profile: out of memory");
  }
  __atomic_store_n(&S.running, 1, __ATOMIC_RELAXED);
  eng_op_set_hook(hook, NULL);
  pthread_mutex_unlock(&S.lock);
  return ENG_OK;
}

eng_status_t eng_profile_stop(void) {
  pthread_mutex_lock(&S.lock);
  if (!S.running) {
    pthread_mutex_unlock(&S.lock);
    return eng_error(ENG_ERR_ARG, "profile: no profile is running");
  }
  eng_op_set_hook(NULL, NULL);
  S.t1 = eng_profile_now_ns();
  phase_close_locked(S.t1);
  __atomic_store_n(&S.running, 0, __ATOMIC_RELAXED);
  int cuda = S.cuda;
  pthread_mutex_unlock(&S.lock);
  if (cuda) eng_prof_gpu_stop();
  return ENG_OK;
}

void eng_profile_phase(const char *name) {
  if (!eng_profile_running()) return;
  pthread_mutex_lock(&S.lock);
  if (S.running) {
    uint64_t t = eng_profile_now_ns();
    int backward = eng_grad_in_backward() != 0;
    if (S.auto_backward && backward) {
      /* marked during the backward pass: it takes effect once the pass ends */
      follow_backward_locked(1);
      snprintf(S.resume_phase, sizeof S.resume_phase, "%s", name);
    } else if (S.in_backward || strncmp(S.phases[S.n_phases - 1].name, name, 31) != 0) {
      S.in_backward = 0;
      phase_begin_locked(name, t);
    } /* else: already in that phase */
  }
  pthread_mutex_unlock(&S.lock);
}

void eng_profile_data(eng_profile_data_t *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&S.lock);
  out->ops = S.ops;
  out->n_ops = S.n_ops;
  out->shapes = S.shapes;
  out->phases = S.phases;
  out->n_phases = S.n_phases;
  out->t0 = S.t0;
  out->t1 = S.t1;
  out->cuda = S.cuda;
  pthread_mutex_unlock(&S.lock);
  eng_prof_gpu_data(out);
}

/* Appends s to buf[*len..n) (cut at the end). */
static void put(char *buf, size_t n, size_t *len, const char *s) {
  while (*s && *len + 1 < n) buf[(*len)++] = *s++;
  buf[*len] = '\0';
}

static void put_int(char *buf, size_t n, size_t *len, int64_t v) {
  char digits[24];
  int k = (int)sizeof digits - 1;
  digits[k] = '\0';
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do digits[--k] = (char)('0' + u % 10); while ((u /= 10) && k > 1);
  if (v < 0) digits[--k] = '-';
  put(buf, n, len, digits + k);
}

/* By hand rather than snprintf: the records of a long profile format tens of thousands of these. */
const char *eng_profile_op_inputs(const eng_profile_data_t *d, const eng_prof_op_t *op, char *buf,
                                  size_t n) {
  size_t len = 0;
  if (!n) return buf;
  buf[0] = '\0';
  const int64_t *p = d->shapes + op->shape_off;
  for (int k = 0; k < op->n_inputs; k++) {
    if (k) put(buf, n, &len, ", ");
    int64_t h = *p++;
    if (h < 0) {
      put(buf, n, &len, "-");
      continue;
    }
    int ndim = (int)(h >> 8);
    put(buf, n, &len, eng_dtype_name((eng_dtype_t)(h & 0xff)));
    put(buf, n, &len, "[");
    for (int i = 0; i < ndim; i++) {
      if (i) put(buf, n, &len, ",");
      put_int(buf, n, &len, p[i]);
    }
    put(buf, n, &len, "]");
    p += ndim;
  }
  return buf;
}
