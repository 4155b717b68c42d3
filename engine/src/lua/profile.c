/* The profiler's binding: starts/stops the core recorder (eng_profile.h) with a site function that
 * names the Lua source line issuing each op, and hands the records to lua/engine/profile.lua, which
 * builds the reports. engine.profile_phase(name) marks phases.
 *
 * Sites: at each op the Lua stack of the state that started the profile is walked from the top;
 * the op gets two lines: `line`, the first frame outside the engine's own Lua code (lua/engine/...),
 * and `frame`, the innermost Lua frame (which may be inside lua/engine, e.g. a layer's forward).
 * Each distinct (source, line) is interned once; per op this costs a few lua_getinfo calls. Ops
 * dispatched from other threads get no site. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "eng_cuda.h"
#include "eng_profile.h"
#include "lua/lua_internal.h"

#define FRAMEWORK "lua/engine/"
#define MAX_LEVELS 64

typedef struct {
  const char *key; /* lua_Debug.source pointer: stable while its chunk lives */
  int line;
  uint32_t id;
} site_slot_t;

static struct {
  lua_State *L;     /* the state that started the running profile, else NULL */
  pthread_t owner;  /* its thread */
  site_slot_t *slots; /* open addressing on (key, line) */
  size_t cap;
  char **labels;      /* id - 1 -> "source:line" (malloc'd) */
  char **sources;     /* id - 1 -> the source string, to tell a reused pointer from its old chunk */
  size_t n, cap_labels;
} P;

static const char guard_key = 'g'; /* registry: the guard userdata of a running profile */

static void clear_sites(void) {
  for (size_t i = 0; i < P.n; i++) {
    free(P.labels[i]);
    free(P.sources[i]);
  }
  free(P.labels);
  free(P.sources);
  free(P.slots);
  P.labels = P.sources = NULL;
  P.slots = NULL;
  P.n = P.cap = P.cap_labels = 0;
}

static size_t slot_of(const char *key, int line, size_t cap) {
  uintptr_t h = ((uintptr_t)key ^ ((uintptr_t)line * 0x9E3779B1u)) * 0x9E3779B97F4A7C15u;
  return (size_t)(h >> 11) & (cap - 1);
}

static int grow_slots(void) {
  size_t cap = P.cap ? P.cap * 2 : 1024;
  site_slot_t *s = calloc(cap, sizeof *s);
  if (!s) return -1;
  for (size_t i = 0; i < P.cap; i++) {
    if (!P.slots[i].key) continue;
    size_t j = slot_of(P.slots[i].key, P.slots[i].line, cap);
    while (s[j].key) j = (j + 1) & (cap - 1);
    s[j] = P.slots[i];
  }
  free(P.slots);
  P.slots = s;
  P.cap = cap;
  return 0;
}

/* A new site id for source:line; 0 when memory ran out. */
static uint32_t new_site(const char *source, int line) {
  if (P.n == P.cap_labels) {
    size_t cap = P.cap_labels ? P.cap_labels * 2 : 256;
    char **l = realloc(P.labels, cap * sizeof *l);
    if (l) P.labels = l;
    char **s = realloc(P.sources, cap * sizeof *s);
    if (s) P.sources = s;
    if (!l || !s) return 0;
    P.cap_labels = cap;
  }
  const char *shown = source[0] == '@' || source[0] == '=' ? source + 1 : source;
  size_t n = strlen(shown) + 24;
  char *label = malloc(n);
  char *src = strdup(source);
  if (!label || !src) {
    free(label);
    free(src);
    return 0;
  }
  snprintf(label, n, "%s:%d", shown, line);
  P.labels[P.n] = label;
  P.sources[P.n] = src;
  return (uint32_t)++P.n;
}

static uint32_t intern(const char *source, int line) {
  if ((P.n + 1) * 2 > P.cap && grow_slots()) return 0;
  size_t i = slot_of(source, line, P.cap);
  for (;; i = (i + 1) & (P.cap - 1)) {
    site_slot_t *s = &P.slots[i];
    if (!s->key) break;
    if (s->key == source && s->line == line) {
      if (strcmp(P.sources[s->id - 1], source) == 0) return s->id;
      /* the pointer now belongs to another chunk: repoint the slot to a fresh site */
      uint32_t id = new_site(source, line);
      if (id) s->id = id;
      return id;
    }
  }
  uint32_t id = new_site(source, line);
  if (id) P.slots[i] = (site_slot_t){source, line, id};
  return id;
}

/* Only the lines kept are looked up and interned: the innermost Lua frame's, and the first one
 * outside the framework (frames in between cost one "S" lookup each). */
static void lua_site(void *user, uint32_t *site, uint32_t *frame) {
  lua_State *L = (lua_State *)user;
  if (!P.L || !pthread_equal(pthread_self(), P.owner)) return;
  lua_Debug ar;
  uint32_t top = 0;
  for (int level = 0; level < MAX_LEVELS && lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "S", &ar) || !ar.source || ar.what[0] == 'C') continue;
    int framework = strstr(ar.source, FRAMEWORK) != NULL;
    if (top && framework) continue;
    if (!lua_getinfo(L, "l", &ar) || ar.currentline <= 0) continue;
    uint32_t id = intern(ar.source, ar.currentline);
    if (!top) top = id;
    if (!framework) {
      *site = id;
      *frame = top;
      return;
    }
  }
  *site = top;
  *frame = top;
}

/* ---- start / stop ---- */

static void stop_session(void) {
  if (P.L && eng_profile_running()) eng_profile_stop();
  P.L = NULL;
}

/* __gc of the guard: the state closes while its profile runs (an error skipped the stop). */
static int guard_gc(lua_State *L) {
  lua_State **box = (lua_State **)lua_touserdata(L, 1);
  if (box && *box && *box == P.L) stop_session();
  return 0;
}

/* The guard userdata lives in the registry while a profile runs; a normal stop disarms it. */
static void set_guard(lua_State *L, int on) {
  lua_pushlightuserdata(L, (void *)&guard_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  lua_State **old = (lua_State **)lua_touserdata(L, -1);
  if (old) *old = NULL;
  lua_pop(L, 1);
  lua_pushlightuserdata(L, (void *)&guard_key);
  if (on) {
    lua_State **box = (lua_State **)lua_newuserdata(L, sizeof *box);
    *box = L;
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, guard_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
  } else {
    lua_pushnil(L);
  }
  lua_rawset(L, LUA_REGISTRYINDEX);
}

static int opt_bool(lua_State *L, int idx, const char *key, int def) {
  lua_getfield(L, idx, key);
  int v = lua_isnil(L, -1) ? def : lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* engine._profile_start{cuda = bool, phases = bool, first_phase = "forward"} */
static int p_start(lua_State *L) {
  static const char *const allowed[] = {"cuda", "phases", "first_phase", NULL};
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lt_check_opts(L, 1, "profile", allowed);
  } else {
    lua_settop(L, 0);
    lua_newtable(L);
  }
  lua_getfield(L, 1, "first_phase");
  const char *first = lua_tostring(L, -1);
  eng_profile_opts_t opts = {.cuda = opt_bool(L, 1, "cuda", 0),
                             .auto_backward = opt_bool(L, 1, "phases", 1),
                             .first_phase = first,
                             .site = getenv("NOSITE") ? NULL : lua_site,
                             .site_user = L};
  if (eng_profile_running()) return lt_raise(L, "profile: a profile is already running (profiles do not nest)");
  clear_sites();
  P.L = L;
  P.owner = pthread_self();
  if (eng_profile_start(&opts) != ENG_OK) {
    P.L = NULL;
    return lt_fail(L, "profile");
  }
  set_guard(L, 1);
  return 0;
}

static void set_num(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

static void set_str(lua_State *L, const char *k, const char *v) {
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

static void set_triple(lua_State *L, const char *k, const int32_t *v) {
  lua_createtable(L, 3, 0);
  for (int i = 0; i < 3; i++) {
    lua_pushnumber(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, k);
}

/* Times relative to the session start, in ns (exact in a double for 104 days). */
static double rel(const eng_profile_data_t *d, uint64_t t) { return t ? (double)(int64_t)(t - d->t0) : 0; }

static void push_site(lua_State *L, const char *k, uint32_t id) {
  if (id && id <= P.n) set_str(L, k, P.labels[id - 1]);
}

static void push_ops(lua_State *L, const eng_profile_data_t *d) {
  lua_createtable(L, (int)d->n_ops, 0);
  char buf[512];
  for (size_t i = 0; i < d->n_ops; i++) {
    const eng_prof_op_t *o = &d->ops[i];
    lua_createtable(L, 0, 14);
    set_num(L, "seq", o->seq);
    set_str(L, "name", o->name);
    set_num(L, "t0", rel(d, o->t0));
    set_num(L, "t1", o->t1 ? rel(d, o->t1) : rel(d, o->t0));
    set_num(L, "parent", o->parent);
    set_num(L, "thread", o->thread);
    set_str(L, "device", o->device < 0 ? "cpu" : "cuda");
    set_num(L, "device_index", o->device < 0 ? 0 : o->device);
    set_str(L, "inputs", eng_profile_op_inputs(d, o, buf, sizeof buf));
    lua_pushboolean(L, o->backward);
    lua_setfield(L, -2, "backward");
    set_str(L, "phase", o->phase < d->n_phases ? d->phases[o->phase].name : "");
    push_site(L, "line", o->site);
    push_site(L, "frame", o->frame);
    lua_rawseti(L, -2, (int)i + 1);
  }
}

static void push_kernels(lua_State *L, const eng_profile_data_t *d) {
  lua_createtable(L, (int)d->n_kernels, 0);
  for (size_t i = 0; i < d->n_kernels; i++) {
    const eng_prof_kernel_t *k = &d->kernels[i];
    lua_createtable(L, 0, 13);
    set_str(L, "name", k->name);
    set_num(L, "t0", rel(d, k->t0));
    set_num(L, "t1", rel(d, k->t1));
    set_num(L, "correlation", k->correlation);
    set_num(L, "op", k->op);
    set_num(L, "stream", k->stream);
    set_num(L, "device", k->device);
    set_triple(L, "grid", k->grid);
    set_triple(L, "block", k->block);
    set_num(L, "registers", k->registers);
    set_num(L, "static_smem", k->static_smem);
    set_num(L, "dynamic_smem", k->dynamic_smem);
    lua_rawseti(L, -2, (int)i + 1);
  }
}

static void push_copies(lua_State *L, const eng_profile_data_t *d) {
  lua_createtable(L, (int)d->n_copies, 0);
  for (size_t i = 0; i < d->n_copies; i++) {
    const eng_prof_copy_t *c = &d->copies[i];
    lua_createtable(L, 0, 9);
    set_str(L, "name", c->name);
    set_str(L, "kind", c->kind == ENG_PROF_MEMSET ? "memset" : "memcpy");
    set_num(L, "t0", rel(d, c->t0));
    set_num(L, "t1", rel(d, c->t1));
    set_num(L, "bytes", (double)c->bytes);
    set_num(L, "correlation", c->correlation);
    set_num(L, "op", c->op);
    set_num(L, "stream", c->stream);
    set_num(L, "device", c->device);
    lua_rawseti(L, -2, (int)i + 1);
  }
}

static void push_apis(lua_State *L, const eng_profile_data_t *d) {
  lua_createtable(L, (int)d->n_apis, 0);
  for (size_t i = 0; i < d->n_apis; i++) {
    const eng_prof_api_t *a = &d->apis[i];
    lua_createtable(L, 0, 7);
    set_str(L, "name", a->name);
    set_num(L, "t0", rel(d, a->t0));
    set_num(L, "t1", rel(d, a->t1));
    set_num(L, "correlation", a->correlation);
    set_num(L, "op", a->op);
    set_num(L, "thread", a->thread);
    lua_pushboolean(L, a->driver);
    lua_setfield(L, -2, "driver");
    lua_rawseti(L, -2, (int)i + 1);
  }
}

static void push_phases(lua_State *L, const eng_profile_data_t *d) {
  lua_createtable(L, (int)d->n_phases, 0);
  for (size_t i = 0; i < d->n_phases; i++) {
    const eng_prof_phase_t *p = &d->phases[i];
    lua_createtable(L, 0, 5);
    set_str(L, "name", p->name);
    set_num(L, "t0", rel(d, p->t0));
    set_num(L, "t1", rel(d, p->t1));
    set_num(L, "peak_cpu", (double)p->peak_cpu);
    if (p->peak_cuda >= 0) set_num(L, "peak_cuda", (double)p->peak_cuda);
    lua_rawseti(L, -2, (int)i + 1);
  }
}

/* engine._profile_stop() -> {ops, kernels, copies, apis, phases, wall_ns, cuda, dropped} */
static int p_stop(lua_State *L) {
  if (!P.L || !eng_profile_running()) return lt_raise(L, "profile: no profile is running");
  stop_session();
  set_guard(L, 0);
  eng_profile_data_t d;
  eng_profile_data(&d);
  lua_createtable(L, 0, 8);
  push_ops(L, &d);
  lua_setfield(L, -2, "ops");
  push_kernels(L, &d);
  lua_setfield(L, -2, "kernels");
  push_copies(L, &d);
  lua_setfield(L, -2, "copies");
  push_apis(L, &d);
  lua_setfield(L, -2, "apis");
  push_phases(L, &d);
  lua_setfield(L, -2, "phases");
  set_num(L, "wall_ns", rel(&d, d.t1));
  set_num(L, "dropped", (double)d.dropped);
  lua_pushboolean(L, d.cuda);
  lua_setfield(L, -2, "cuda");
  eng_profile_clear();
  clear_sites();
  return 1;
}

static int p_phase(lua_State *L) {
  const char *name = lua_type(L, 1) == LUA_TSTRING ? lua_tostring(L, 1) : NULL;
  if (!name) return lt_type_error(L, 1, "profile_phase", "a phase name");
  lt_no_more_args(L, 2, "profile_phase");
  eng_profile_phase(name);
  return 0;
}

static int p_cuda_available(lua_State *L) {
  lua_pushboolean(L, eng_profile_cuda_available());
  return 1;
}

/* Tensor bytes alive now: cpu, cuda (what the studies measure saved memory with). */
static int p_bytes_live(lua_State *L) {
  lua_pushnumber(L, (double)eng_cpu_bytes_live());
  lua_pushnumber(L, (double)eng_cuda_bytes_live());
  return 2;
}

static int p_running(lua_State *L) {
  lua_pushboolean(L, eng_profile_running());
  return 1;
}

static const lt_reg_t profile_regs[] = {
    {"profile_phase", p_phase, "engine.profile_phase(name)",
     "Marks the start of a phase (\"forward\", \"backward\", \"optimizer\", ...) in the running "
     "profile; its ops and peak memory are reported per phase. Autograd's backward pass is phase "
     "\"backward\" by itself. Does nothing when no profile runs.",
     NULL},
    {"_profile_start", p_start, "engine._profile_start{cuda =, phases =, first_phase =}",
     "Starts the recorder (engine.profile calls it).", NULL},
    {"_profile_stop", p_stop, "engine._profile_stop() -> records",
     "Stops the recorder and returns its records (engine.profile calls it).", NULL},
    {"_profile_cuda_available", p_cuda_available, "engine._profile_cuda_available()",
     "Whether GPU activity can be recorded (a CUDA build with CUPTI and a GPU).", NULL},
    {"_profile_bytes_live", p_bytes_live, "engine._profile_bytes_live() -> cpu, cuda",
     "Bytes held by live tensors on the CPU and on GPUs.", NULL},
    {"_profile_running", p_running, "engine._profile_running()", "Whether a profile runs.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

void lt_open_profile(lua_State *L, int engine) { lt_register(L, engine, 0, profile_regs); }
