/* engine.cuda's objects: streams (and the current stream), events, and graphs.
 *
 * The current stream is per thread in the runtime (eng_cuda.h). This state also remembers the
 * Stream it made current on each device (a registry table, device + 1 -> Stream), which keeps that
 * stream alive while ops run on it. */
#include "eng_cuda.h"
#include "lua/lua_internal.h"

#define STREAM_MT "engine.cuda.Stream"
#define EVENT_MT "engine.cuda.Event"
#define GRAPH_MT "engine.cuda.Graph"

typedef struct {
  eng_stream_t s; /* NULL until created */
  int device;
  int owned; /* made by Stream() (destroyed by __gc), not a view of the default stream */
} lt_stream_t;

typedef struct {
  eng_event_t e;
  int device;
} lt_event_t;

typedef struct {
  eng_cuda_graph_t *g; /* NULL once freed */
} lt_graph_t;

static const char current_key = 'c'; /* registry: the table of current Streams */

/* ---- streams ---- */

static lt_stream_t *push_stream(lua_State *L, eng_stream_t s, int device, int owned) {
  lt_stream_t *u = (lt_stream_t *)lua_newuserdata(L, sizeof *u);
  *u = (lt_stream_t){s, device, owned};
  luaL_getmetatable(L, STREAM_MT);
  lua_setmetatable(L, -2);
  return u;
}

static lt_stream_t *check_stream(lua_State *L, int idx, const char *op) {
  lt_stream_t *u = (lt_stream_t *)luaL_testudata(L, idx, STREAM_MT);
  if (!u || !u->s) lt_type_error(L, idx, op, "a cuda Stream");
  return u;
}

static void push_current_table(lua_State *L) {
  lua_pushlightuserdata(L, (void *)&current_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
}

/* Makes the Stream at idx (0: the default stream) current on dev, and remembers it. */
static eng_status_t make_current(lua_State *L, int dev, int idx) {
  lt_stream_t *u = idx ? (lt_stream_t *)lua_touserdata(L, idx) : NULL;
  eng_status_t st = eng_cuda_set_current_stream(dev, u ? u->s : NULL);
  if (st) return st;
  push_current_table(L);
  if (idx)
    lua_pushvalue(L, idx);
  else
    lua_pushnil(L);
  lua_rawseti(L, -2, dev + 1);
  lua_pop(L, 1);
  return ENG_OK;
}

static int c_stream(lua_State *L) {
  int dev = lt_cuda_device_arg(L, 1, "cuda.Stream");
  lt_no_more_args(L, 2, "cuda.Stream");
  lt_stream_t *u = push_stream(L, NULL, dev, 1); /* first, so that the GC owns what follows */
  if (eng_cuda_stream_new(dev, &u->s) != ENG_OK) return lt_cuda_fail(L);
  return 1;
}

static int c_current_stream(lua_State *L) {
  int dev = lt_cuda_device_arg(L, 1, "cuda.current_stream");
  lt_no_more_args(L, 2, "cuda.current_stream");
  eng_stream_t cur = eng_cuda_current_stream(dev);
  if (!cur) return lt_cuda_fail(L);
  push_current_table(L);
  lua_rawgeti(L, -1, dev + 1);
  lt_stream_t *u = (lt_stream_t *)luaL_testudata(L, -1, STREAM_MT);
  if (u && u->s == cur) return 1;
  push_stream(L, cur, dev, 0); /* the default stream (never destroyed) */
  return 1;
}

static int c_set_stream(lua_State *L) {
  if (lua_isnoneornil(L, 1)) {
    int dev = lt_cuda_device_arg(L, 2, "cuda.set_stream");
    lt_no_more_args(L, 3, "cuda.set_stream");
    if (make_current(L, dev, 0) != ENG_OK) return lt_cuda_fail(L);
    return 0;
  }
  lt_stream_t *u = check_stream(L, 1, "cuda.set_stream");
  lt_no_more_args(L, 2, "cuda.set_stream");
  if (make_current(L, u->device, 1) != ENG_OK) return lt_cuda_fail(L);
  return 0;
}

static int c_with_stream(lua_State *L) {
  lt_stream_t *u = check_stream(L, 1, "cuda.with_stream");
  if (lua_type(L, 2) != LUA_TFUNCTION) return lt_type_error(L, 2, "cuda.with_stream", "a function");
  lt_no_more_args(L, 3, "cuda.with_stream");
  lua_settop(L, 2);
  push_current_table(L);
  lua_rawgeti(L, -1, u->device + 1);
  lua_remove(L, -2); /* 3: the Stream current before (nil: the default), kept alive here */
  if (make_current(L, u->device, 1) != ENG_OK) return lt_cuda_fail(L);
  lua_pushvalue(L, 2);
  int failed = lua_pcall(L, 0, LUA_MULTRET, 0);
  /* Restoring cannot fail: the stream was current before and nothing is capturing (fn's own
   * captures end inside it). */
  make_current(L, u->device, lua_isnil(L, 3) ? 0 : 3);
  if (failed) return lua_error(L);
  return lua_gettop(L) - 3;
}

static int s_synchronize(lua_State *L) {
  lt_stream_t *u = check_stream(L, 1, "Stream:synchronize");
  if (eng_cuda_stream_synchronize(u->s) != ENG_OK) return lt_cuda_fail(L);
  return 0;
}

static int s_gc(lua_State *L) {
  lt_stream_t *u = (lt_stream_t *)luaL_checkudata(L, 1, STREAM_MT);
  if (u->owned && u->s) eng_cuda_stream_free(u->s);
  u->s = NULL;
  return 0;
}

static int s_eq(lua_State *L) {
  lt_stream_t *a = (lt_stream_t *)luaL_testudata(L, 1, STREAM_MT);
  lt_stream_t *b = (lt_stream_t *)luaL_testudata(L, 2, STREAM_MT);
  lua_pushboolean(L, a && b && a->s == b->s);
  return 1;
}

static int s_tostring(lua_State *L) {
  lt_stream_t *u = (lt_stream_t *)luaL_checkudata(L, 1, STREAM_MT);
  lua_pushfstring(L, "cuda.Stream(cuda:%d, %p)", u->device, u->s);
  return 1;
}

/* ---- events ---- */

static lt_event_t *check_event(lua_State *L, int idx, const char *op) {
  lt_event_t *u = (lt_event_t *)luaL_testudata(L, idx, EVENT_MT);
  if (!u || !u->e) lt_type_error(L, idx, op, "a cuda Event");
  return u;
}

static int c_event(lua_State *L) {
  int dev = lt_cuda_device_arg(L, 1, "cuda.Event");
  lt_no_more_args(L, 2, "cuda.Event");
  lt_event_t *u = (lt_event_t *)lua_newuserdata(L, sizeof *u);
  *u = (lt_event_t){NULL, dev};
  luaL_getmetatable(L, EVENT_MT);
  lua_setmetatable(L, -2);
  if (eng_cuda_event_new(dev, &u->e) != ENG_OK) return lt_cuda_fail(L);
  return 1;
}

static int e_record(lua_State *L) {
  lt_event_t *u = check_event(L, 1, "Event:record");
  eng_stream_t s;
  if (lua_isnoneornil(L, 2)) {
    if (!(s = eng_cuda_current_stream(u->device))) return lt_cuda_fail(L);
  } else {
    lt_stream_t *st = check_stream(L, 2, "Event:record");
    if (st->device != u->device)
      return lt_raise(L, "Event:record: the stream is on cuda:%d, the event on cuda:%d", st->device,
                      u->device);
    s = st->s;
  }
  lt_no_more_args(L, 3, "Event:record");
  if (eng_cuda_event_record(u->e, s) != ENG_OK) return lt_cuda_fail(L);
  lua_settop(L, 1);
  return 1;
}

static int e_synchronize(lua_State *L) {
  lt_event_t *u = check_event(L, 1, "Event:synchronize");
  if (eng_cuda_event_synchronize(u->e) != ENG_OK) return lt_cuda_fail(L);
  return 0;
}

static int e_elapsed(lua_State *L) {
  lt_event_t *start = check_event(L, 1, "Event:elapsed");
  lt_event_t *end = check_event(L, 2, "Event:elapsed");
  lt_no_more_args(L, 3, "Event:elapsed");
  float ms = 0;
  if (eng_cuda_event_elapsed(start->e, end->e, &ms) != ENG_OK) return lt_cuda_fail(L);
  lua_pushnumber(L, ms);
  return 1;
}

static int e_gc(lua_State *L) {
  lt_event_t *u = (lt_event_t *)luaL_checkudata(L, 1, EVENT_MT);
  eng_cuda_event_free(u->e);
  u->e = NULL;
  return 0;
}

/* ---- graphs ---- */

static int c_graph(lua_State *L) {
  if (lua_type(L, 1) != LUA_TFUNCTION) return lt_type_error(L, 1, "cuda.graph", "a function");
  int dev = lt_cuda_device_arg(L, 2, "cuda.graph");
  lt_no_more_args(L, 3, "cuda.graph");
  lua_settop(L, 1);
  lt_graph_t *u = (lt_graph_t *)lua_newuserdata(L, sizeof *u); /* 2 */
  u->g = NULL;
  luaL_getmetatable(L, GRAPH_MT);
  lua_setmetatable(L, 2);
  /* The graph keeps fn, and so the tensors it closes over, alive: replays read and write them. */
  lua_createtable(L, 1, 0);
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, 1);
  lua_setfenv(L, 2);
  if (eng_cuda_graph_begin(dev, &u->g) != ENG_OK) return lt_cuda_fail(L);
  lua_pushvalue(L, 1);
  if (lua_pcall(L, 0, LUA_MULTRET, 0) != 0) {
    eng_cuda_graph_free(u->g); /* ends the capture and restores the current stream */
    u->g = NULL;
    return lua_error(L);
  }
  if (eng_cuda_graph_end(&u->g) != ENG_OK) return lt_cuda_fail(L);
  return lua_gettop(L) - 1; /* the graph, then fn's results */
}

static lt_graph_t *check_graph(lua_State *L, const char *op) {
  lt_graph_t *u = (lt_graph_t *)luaL_testudata(L, 1, GRAPH_MT);
  if (!u) lt_type_error(L, 1, op, "a cuda Graph");
  if (!u->g) lt_raise(L, "%s: the graph was freed", op);
  return u;
}

static int g_replay(lua_State *L) {
  lt_graph_t *u = check_graph(L, "Graph:replay");
  lt_no_more_args(L, 2, "Graph:replay");
  if (eng_cuda_graph_replay(u->g) != ENG_OK) return lt_cuda_fail(L);
  return 0;
}

static int g_gc(lua_State *L) {
  lt_graph_t *u = (lt_graph_t *)luaL_checkudata(L, 1, GRAPH_MT);
  eng_cuda_graph_free(u->g);
  u->g = NULL;
  return 0;
}

static int g_free(lua_State *L) {
  check_graph(L, "Graph:free");
  return g_gc(L);
}

/* ---- registration ---- */

static const lt_reg_t object_regs[] = {
    {"Stream", c_stream, "engine.cuda.Stream([device])",
     "A new stream (a queue of GPU work that runs concurrently with other streams' work). Make "
     "it current with set_stream or with_stream. Memory freed by work on one stream is reused by "
     "allocations on the same stream only; a tensor used on another stream must stay alive until "
     "that work is done.",
     NULL},
    {"current_stream", c_current_stream, "engine.cuda.current_stream([device])",
     "The stream ops on the device run on now: the default stream unless one was set. Streams "
     "compare equal with ==.",
     NULL},
    {"set_stream", c_set_stream, "engine.cuda.set_stream(s) / engine.cuda.set_stream(nil[, device])",
     "Makes stream s current on its device (for this thread); nil restores the default stream.",
     NULL},
    {"with_stream", c_with_stream, "engine.cuda.with_stream(s, fn)",
     "Runs fn() with stream s current and restores the previous stream afterwards, also when fn "
     "raises. Returns fn's results.",
     NULL},
    {"Event", c_event, "engine.cuda.Event([device])",
     "A new event, for timing GPU work: e:record([stream]) marks a point in a stream (default: "
     "the current one), e:synchronize() waits for it, start:elapsed(stop) gives the milliseconds "
     "between two completed events.",
     NULL},
    {"graph", c_graph, "engine.cuda.graph(fn[, device]) -> g, fn's results",
     "Captures the GPU work of fn() into a CUDA graph without running it; g:replay() runs it all "
     "with one launch, on the current stream. Tensors made inside fn come from memory reserved for "
     "the graph, so each replay rewrites the same tensors (fn's results, for instance) and no "
     "other code is handed that memory while g lives. Tensors made before and read inside fn "
     "must stay alive while g is replayed (g keeps fn, and so its upvalues, alive). Inside fn "
     "only GPU work is allowed: no "
     "host copies (x:cpu(), x:item(), printing), no synchronize, no stream switches. An error in "
     "fn ends the capture and is raised again.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static const lt_reg_t stream_methods[] = {
    {"synchronize", s_synchronize, "s:synchronize()", "Waits until the work queued on s is done.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static const lt_reg_t event_methods[] = {
    {"record", e_record, "e:record([stream])",
     "Marks the current point of stream (default: the device's current stream); returns e.", NULL},
    {"synchronize", e_synchronize, "e:synchronize()",
     "Waits until the work before the recorded point is done.", NULL},
    {"elapsed", e_elapsed, "start:elapsed(stop)",
     "Milliseconds between two recorded events (synchronize stop first).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static const lt_reg_t graph_methods[] = {
    {"replay", g_replay, "g:replay()",
     "Runs the captured work on the current stream (asynchronously, like any op).", NULL},
    {"free", g_free, "g:free()",
     "Frees the graph and its reserved memory now (tensors made during capture stay valid until "
     "they are freed themselves).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* A metatable named `name` with __index = a documented methods table, plus metamethods. */
static void open_type(lua_State *L, const char *name, const lt_reg_t *methods, const luaL_Reg *meta) {
  luaL_newmetatable(L, name);
  luaL_setfuncs(L, meta, 0);
  lua_newtable(L);
  lt_register(L, lua_gettop(L), 0, methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

void lt_open_cuda_objects(lua_State *L, int cuda) {
  static const luaL_Reg stream_meta[] = {
      {"__gc", s_gc}, {"__eq", s_eq}, {"__tostring", s_tostring}, {NULL, NULL}};
  static const luaL_Reg event_meta[] = {{"__gc", e_gc}, {NULL, NULL}};
  static const luaL_Reg graph_meta[] = {{"__gc", g_gc}, {NULL, NULL}};
  open_type(L, STREAM_MT, stream_methods, stream_meta);
  open_type(L, EVENT_MT, event_methods, event_meta);
  open_type(L, GRAPH_MT, graph_methods, graph_meta);
  lua_pushlightuserdata(L, (void *)&current_key);
  lua_newtable(L);
  lua_rawset(L, LUA_REGISTRYINDEX);
  lt_register(L, cuda, 0, object_regs);
}
