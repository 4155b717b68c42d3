/* engine.cuda from Lua, through the embedding API. The first two tests run everywhere (what every
 * build says, and what a machine without a GPU says); the others need a GPU and skip without one. */
#include <stdio.h>
#include <string.h>

#include "support.h"

static eng_engine_t *new_engine(void) {
  eng_engine_t *e = eng_engine_new();
  cr_assert(e != NULL, "eng_engine_new: %s", eng_last_error());
  return e;
}

static void run(eng_engine_t *e, const char *code) {
  cr_assert(eng_engine_run_string(e, code, "test") == 0, "%s", eng_engine_last_error(e));
}

/* Runs code that must raise an error containing `needle`. */
static void run_fails(eng_engine_t *e, const char *code, const char *needle) {
  cr_assert(eng_engine_run_string(e, code, "test") != 0, "`%s` should have failed", code);
  cr_assert(strstr(eng_engine_last_error(e), needle) != NULL, "`%s`: '%s' lacks '%s'", code,
            eng_engine_last_error(e), needle);
}

static eng_engine_t *gpu_engine(void) {
  if (eng_cuda_device_count() == 0) cr_skip_test("no CUDA GPU");
  return new_engine();
}

Test(cuda_lua, availability_follows_the_device_count_and_everything_is_documented) {
  eng_engine_t *e = new_engine();
  run(e, "assert(engine.cuda.is_available() == (engine.cuda.device_count() > 0))");
  char code[96];
  snprintf(code, sizeof code, "assert(engine.cuda.device_count() == %d)", eng_cuda_device_count());
  run(e, code);
  run(e,
      "for _, k in ipairs{'is_available', 'device_count', 'properties', 'synchronize', "
      "'memory_stats', 'empty_cache', 'reset_peak_memory_stats', 'max_memory_allocated', "
      "'memory_allocated', 'Stream', 'current_stream', 'set_stream', 'with_stream', 'Event', "
      "'graph', 'nvtx'} do\n"
      "  assert(type(engine.cuda[k]) == 'function', k)\n"
      "  assert(engine.docs[engine.cuda[k]], k .. ' has no doc')\n"
      "end\n"
      "assert(engine.docs[engine.cuda])");
  run(e, "engine.cuda.nvtx(false); engine.cuda.nvtx(true)");
  run_fails(e, "engine.cuda.nvtx(1)", "cuda.nvtx: argument 1 must be a boolean");
  eng_engine_free(e);
}

Test(cuda_lua, without_a_gpu_cuda_is_a_clear_error) {
  if (eng_cuda_device_count() > 0) cr_skip_test("a GPU is present");
  eng_engine_t *e = new_engine();
#ifdef ENG_HAVE_CUDA
  const char *parse_why = "device: 'cuda' requested, but no CUDA GPU was found";
  const char *why = "cuda: device 0 does not exist (no CUDA GPU was found)";
#else
  const char *parse_why = "device: 'cuda' requested, but this engine was built without CUDA";
  const char *why = "cuda: this engine was built without CUDA";
#endif
  run_fails(e, "engine.zeros({2}, {device = 'cuda'})", parse_why);
  run_fails(e, "engine.ones(2):to('cuda')", parse_why);
  const char *calls[] = {"engine.cuda.properties()", "engine.cuda.synchronize()",
                         "engine.cuda.memory_stats()", "engine.cuda.empty_cache()",
                         "engine.cuda.memory_allocated()", "engine.cuda.max_memory_allocated()",
                         "engine.cuda.reset_peak_memory_stats()", "engine.cuda.Stream()",
                         "engine.cuda.current_stream()", "engine.cuda.set_stream(nil)",
                         "engine.cuda.Event()", "engine.cuda.graph(function() end)"};
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) run_fails(e, calls[i], why);
  run(e,
      "called = false\n"
      "assert(not pcall(engine.cuda.graph, function() called = true end))\n"
      "assert(not called, 'no capture, so fn must not run')\n"
      "assert(engine.ones({3}):sum():item() == 3, 'the CPU keeps working')");
  eng_engine_free(e);
}

Test(cuda_lua, properties) {
  eng_engine_t *e = gpu_engine();
  run(e,
      "local p = engine.cuda.properties()\n"
      "assert(type(p.name) == 'string' and #p.name > 0)\n"
      "assert(p.device == 0 and p.sm_count > 0 and p.total_memory > 1e9 and p.major >= 7)\n"
      "assert(p.l2_bytes > 0 and p.clock_khz > 0 and p.memory_bus_bits > 0)\n"
      "assert(engine.cuda.properties(0).name == p.name)\n"
      "assert(engine.cuda.properties('cuda:0').sm_count == p.sm_count)\n"
      "local ok, err = pcall(engine.cuda.properties, engine.cuda.device_count())\n"
      "assert(not ok and err:find('does not exist'), err)\n"
      "ok, err = pcall(engine.cuda.properties, 'cpu')\n"
      "assert(not ok and err:find('must be a CUDA device'), err)");
  eng_engine_free(e);
}

Test(cuda_lua, tensors_go_to_the_gpu_and_back) {
  eng_engine_t *e = gpu_engine();
  run(e,
      "engine.manual_seed(3)\n"
      "for _, dt in ipairs{'f32', 'f64', 'bf16', 'f16', 'i64', 'i32', 'u8'} do\n"
      "  local x = (engine.randn({37, 129}) * 50):to(dt)\n"
      "  local y = x:to('cuda')\n"
      "  assert(y:device() == 'cuda:0' and y:dtype() == dt)\n"
      "  local z = y:cpu()\n"
      "  assert(z:device() == 'cpu' and z:dtype() == dt)\n"
      "  local a, b = x:tolist(), z:tolist()\n"
      "  for i = 1, 37 do for j = 1, 129 do\n"
      "    assert(a[i][j] == b[i][j], dt .. ': ' .. a[i][j] .. ' became ' .. b[i][j])\n"
      "  end end\n"
      "end\n"
      "local x = engine.randn({8, 6})\n"
      "local back = x:t():to('cuda'):cpu():tolist()\n"
      "for i = 1, 6 do for j = 1, 8 do assert(back[i][j] == x:get(j - 1, i - 1)) end end\n"
      "local g = engine.zeros({4}, {device = 'cuda:0'})\n"
      "g:set(2, 7.5)\n"
      "assert(g:get(2) == 7.5 and g:get(1) == 0)\n"
      "assert(g:to({device = 'cpu', dtype = 'f64'}):tolist()[3] == 7.5)");
  eng_engine_free(e);
}

Test(cuda_lua, memory_stats_and_free) {
  eng_engine_t *e = gpu_engine();
  run(e,
      "local c = engine.cuda\n"
      "collectgarbage(); collectgarbage()\n"
      "local s = c.memory_stats()\n"
      "for _, k in ipairs{'allocated', 'reserved', 'peak_allocated', 'device_free', 'device_total',\n"
      "                   'n_alloc', 'n_cache_hit', 'n_segment', 'n_oom_retry'} do\n"
      "  assert(type(s[k]) == 'number', k)\n"
      "end\n"
      "assert(s.reserved >= s.allocated and s.device_total > 1e9 and s.device_free <= s.device_total)\n"
      "local MiB = 2^20\n"
      "local before = c.memory_allocated()\n"
      "local t = engine.empty({1024, 1024}, {device = 'cuda'})\n"
      "assert(c.memory_allocated() - before == 4 * MiB)\n"
      "c.reset_peak_memory_stats()\n"
      "assert(c.max_memory_allocated() == c.memory_allocated())\n"
      "local u = engine.empty({1024, 1024}, {device = 'cuda'})\n"
      "assert(c.max_memory_allocated() == before + 8 * MiB)\n"
      "u:free(); t:free()\n"
      "assert(c.memory_allocated() == before, 't:free() gives the block back at once')\n"
      "assert(c.max_memory_allocated() == before + 8 * MiB)\n"
      "local r = c.memory_stats().reserved\n"
      "c.empty_cache()\n"
      "assert(r - c.memory_stats().reserved >= 8 * MiB, 'the two 4 MiB segments went back')\n"
      "local v = engine.ones({1000}, {device = 'cuda'})\n"
      "local w = v:narrow(0, 1, 1)\n" /* a view keeps the block: freeing v gives nothing back */
      "local live = c.memory_allocated()\n"
      "v:free()\n"
      "assert(c.memory_allocated() == live and w:item() == 1)\n"
      "w:free()\n"
      "assert(c.memory_allocated() < live)");
  eng_engine_free(e);
}

Test(cuda_lua, events_time_gpu_work) {
  eng_engine_t *e = gpu_engine();
  run(e,
      "local c = engine.cuda\n"
      "local start, stop = c.Event(), c.Event()\n"
      "assert(start:record() == start)\n"
      "local x = engine.ones({4194304}, {device = 'cuda'})\n"
      "for i = 1, 10 do x = x + 1 end\n"
      "stop:record(c.current_stream())\n"
      "stop:synchronize()\n"
      "local ms = start:elapsed(stop)\n"
      "assert(type(ms) == 'number' and ms >= 0 and ms < 10000, ms)\n"
      "assert(x:get(12345) == 11)\n"
      "local ok, err = pcall(start.elapsed, start, c.Event())\n"
      "assert(not ok and err:find('cuda: '), err)");
  eng_engine_free(e);
}

Test(cuda_lua, streams) {
  eng_engine_t *e = gpu_engine();
  run(e,
      "local c = engine.cuda\n"
      "local def = c.current_stream()\n"
      "assert(def == c.current_stream())\n"
      "local s = c.Stream()\n"
      "assert(s ~= def and tostring(s):find('cuda.Stream'))\n"
      "local r = c.with_stream(s, function()\n"
      "  assert(c.current_stream() == s)\n"
      "  local x = engine.full({1000}, 3, {device = 'cuda'})\n"
      "  return 42, x\n"
      "end)\n"
      "assert(r == 42 and c.current_stream() == def)\n"
      "local ok, err = pcall(c.with_stream, s, function() error('boom') end)\n"
      "assert(not ok and err:find('boom') and c.current_stream() == def)\n"
      "c.set_stream(s)\n"
      "assert(c.current_stream() == s)\n"
      "local y = engine.full({1000}, 5, {device = 'cuda'})\n"
      "s:synchronize()\n"
      "assert(y:get(999) == 5)\n"
      "s = nil; collectgarbage(); collectgarbage()\n" /* current, so kept alive */
      "assert(c.current_stream() ~= def)\n"
      "c.set_stream(nil)\n"
      "assert(c.current_stream() == def)\n"
      "c.synchronize()\n"
      "assert(not pcall(c.set_stream, 42))");
  eng_engine_free(e);
}

Test(cuda_lua, graphs_capture_and_replay) {
  eng_engine_t *e = gpu_engine();
  run(e,
      "local c = engine.cuda\n"
      "local a = engine.full({4096}, 1.5, {device = 'cuda'})\n"
      "local b = engine.full({4096}, 2, {device = 'cuda'})\n"
      "local g, z = c.graph(function() return (a + 0.25) * b end)\n"
      "assert(z:device() == 'cuda:0')\n"
      "g:replay()\n"
      "assert(z:get(0) == 3.5 and z:get(4095) == 3.5)\n"
      "a:fill_(-3)\n"
      "g:replay()\n"
      "local eager, got = ((a + 0.25) * b):cpu():tolist(), z:cpu():tolist()\n"
      "for i = 1, 4096 do assert(got[i] == eager[i] and got[i] == -5.5) end\n"
      "local ok, err = pcall(c.graph, function() error('inside') end)\n"
      "assert(not ok and err:find('inside'), err)\n"
      "ok, err = pcall(c.graph, function() return a:cpu() end)\n"
      "assert(not ok and err:find('captur'), err)\n"
      "assert(c.current_stream() == c.current_stream())\n"
      "local g2, w = c.graph(function() return a * 2 end)\n"
      "g2:replay()\n"
      "assert(w:get(7) == -6)\n"
      "g:free()\n"
      "assert(not pcall(g.replay, g))\n"
      "assert(z:get(1) == -5.5, 'tensors made in a graph outlive it')\n"
      "for i = 1, 100 do g2:replay() end\n"
      "c.synchronize()\n"
      "assert(w:get(0) == -6)");
  eng_engine_free(e);
}

/* A cudaMalloc that fails runs a full collection of the engine states before it gives up: here
 * the garbage (an unreachable big tensor) is what makes the retry succeed. */
Test(cuda_lua, out_of_memory_collects_garbage_first) {
  eng_engine_t *e = gpu_engine();
  run(e,
      "local c = engine.cuda\n"
      "collectgarbage('stop')\n" /* so only the OOM hook can collect */
      "local free = c.memory_stats().device_free\n"
      "local n = math.floor(free * 0.6 / 4)\n"
      "local big = engine.empty({n}, {device = 'cuda'})\n"
      "big = nil\n" /* garbage, but not collected yet */
      "local retries = c.memory_stats().n_oom_retry\n"
      "local again = engine.empty({n}, {device = 'cuda'})\n"
      "assert(c.memory_stats().n_oom_retry == retries + 1)\n"
      "again:free()\n"
      "collectgarbage('restart')\n"
      "local ok, err = pcall(engine.empty, {2^48}, {device = 'cuda'})\n"
      "assert(not ok and err:find('out of memory') and err:find('allocated') and\n"
      "       err:find('cached') and err:find('free'), err)\n"
      "assert(engine.ones({4}, {device = 'cuda'}):get(3) == 1)");
  eng_engine_free(e);
}
