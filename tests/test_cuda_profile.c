/* engine.profile on a GPU: CUPTI's records of a matmul + softmax (+ a copy to the host) name the
 * cuBLAS GEMM kernels and our softmax kernel, each linked to its op and the Lua line that issued
 * it, with positive durations, launched inside their op's CPU span and run in stream order; the
 * trace carries the flows. Also the E88 kernels by name (forward and backward). Skipped without a
 * GPU; the first test checks what a machine without one says. */
#include <stdio.h>
#include <string.h>

#include "support.h"

static eng_engine_t *new_engine(void) {
  eng_engine_t *e = eng_engine_new();
  cr_assert(e != NULL, "eng_engine_new: %s", eng_last_error());
  int rc = eng_engine_run_string(
      e, "package.path = '" ENGINE_SOURCE_DIR "/tests/lua/lib/?.lua;' .. package.path", "setup");
  cr_assert(rc == 0, "setup: %s", eng_engine_last_error(e));
  return e;
}

static void run(eng_engine_t *e, const char *code) {
  cr_assert(eng_engine_run_string(e, code, "test_cuda_profile") == 0, "%s", eng_engine_last_error(e));
}

static eng_engine_t *gpu_engine(void) {
  if (eng_cuda_device_count() == 0) cr_skip_test("no CUDA GPU");
  return new_engine();
}

Test(cuda_profile, without_a_gpu_cuda_profiling_is_a_clear_error) {
  if (eng_cuda_device_count() > 0) cr_skip_test("a GPU is present");
  eng_engine_t *e = new_engine();
  run(e,
      "assert(engine._profile_cuda_available() == false)\n"
      "local ok, err = pcall(engine.profile, function() end, {cuda = true})\n"
      "assert(not ok and err:find('cannot be recorded here', 1, true), tostring(err))\n"
      "local prof = engine.profile(function() local _ = engine.randn{4, 4}:sum() end)\n"
      "assert(prof.records.cuda == false and #prof.records.kernels == 0)\n"
      "assert(#prof.records.ops == 2, #prof.records.ops)");
  eng_engine_free(e);
}

/* The Lua side of the matmul + softmax check; `lines` holds the issuing lines. */
static const char *const matmul_softmax =
    "local t = require 'spec'\n"
    "local src = debug.getinfo(1, 'S').source:gsub('^[@=]', '')\n"
    "local x = engine.randn({512, 768}, {device = 'cuda'})\n"
    "local w = engine.randn({768, 1000}, {device = 'cuda'})\n"
    "local lines = {}\n"
    "local function line() return src .. ':' .. debug.getinfo(2, 'l').currentline end\n"
    "local function step()\n"
    "  local y = x:matmul(w); lines.matmul = line()\n"
    "  local p = y:softmax(-1); lines.softmax = line()\n"
    "  local h = p:cpu(); lines.copy = line()\n"
    "end\n"
    "local prof = engine.profile(step, {warmup = 2})\n"
    "local r = prof.records\n"
    "assert(r.cuda, 'GPU activity recorded by default on a GPU')\n"
    "assert(r.dropped == 0, 'CUPTI dropped records')\n"

    "local found = {}\n"
    "for _, k in ipairs(r.kernels) do\n"
    "  assert(k.t1 > k.t0, k.name .. ': duration > 0')\n"
    "  assert(k.grid[1] > 0 and k.block[1] > 0 and k.registers > 0, k.name .. ': launch config')\n"
    "  assert(k.op > 0, k.name .. ' is linked to no op')\n"
    "  local o = r.ops[k.op]\n"
    "  assert(k.op_name == o.name and k.line == lines[o.name], string.format('%s: op_name %s, op %s, line %s, want line %s', k.name, tostring(k.op_name), o.name, tostring(k.line), tostring(lines[o.name])))\n"
    "  assert(k.t0 >= o.t0, k.name .. ' starts before its op was dispatched')\n"
    "  local api = prof.api_of[k.correlation]\n"
    "  assert(api and api.t0 >= o.t0 and api.t1 <= o.t1, k.name .. ': its launch call lies inside the op span')\n"
    "  local low = k.name:lower()\n"
    "  if o.name == 'matmul' and (low:find('gemm') or low:find('cublas') or low:find('cutlass') or low:find('xmma')) then found.gemm = k end\n"
    "  if o.name == 'softmax' and low:find('softmax') then found.softmax = k end\n"
    "end\n"
    "local names = {}\n"
    "for _, k in ipairs(r.kernels) do names[#names + 1] = k.name end\n"
    "assert(found.gemm, 'no cuBLAS GEMM kernel among: ' .. table.concat(names, ' | '))\n"
    "assert(found.softmax, 'no softmax kernel among: ' .. table.concat(names, ' | '))\n"
    "assert(found.gemm.t1 <= found.softmax.t0, 'the GEMM runs before the softmax (stream order)')\n"
    "assert(not found.gemm.name:find('^_Z'), 'demangled: ' .. found.gemm.name)\n"
    "local copied = 0  -- the host copy may go in chunks through a staging buffer\n"
    "for _, c in ipairs(r.copies) do\n"
    "  if c.name == 'memcpy DtoH' and c.op > 0 and c.op_name == 'copy' and c.line == lines.copy then copied = copied + c.bytes end\n"
    "end\n"
    "assert(copied == 512 * 1000 * 4, 'the DtoH copies of the result: ' .. copied .. ' bytes')\n"
    "local s = prof:summary{group = {GEMM = 'gemm|cublas|cutlass|xmma', Softmax = 'softmax'}}\n"
    "local g = {}\n"
    "for _, row in ipairs(s.groups) do g[row.name] = row end\n"
    "assert(g.GEMM.ms > 0 and g.Softmax.ms > 0, 'groups find the kernels')\n"
    "assert(s.totals.basis == 'gpu' and s.totals.gpu_ms > 0)\n"
    "assert(s.memory.forward.peak_cuda >= 512 * 1000 * 4, 'the CUDA peak holds the matmul output')\n"
    "print(prof:table{group = {GEMM = 'gemm|cublas|cutlass|xmma', Softmax = 'softmax'}})\n"
    "print(prof:kernels())\n"
    "local path = os.tmpname()\n"
    "prof:save_trace(path)\n"
    "local json = dofile('" ENGINE_SOURCE_DIR "/scripts/bench/json.lua')\n"
    "local f = assert(io.open(path)); local doc = json.decode(f:read('*a')); f:close(); os.remove(path)\n"
    "local n = {s = 0, f = 0, kernel = 0}\n"
    "for _, e in ipairs(doc.traceEvents) do\n"
    "  if e.ph == 's' or e.ph == 'f' then n[e.ph] = n[e.ph] + 1 end\n"
    "  if e.cat == 'kernel' then n.kernel = n.kernel + 1; assert(e.pid == 100 and e.dur > 0) end\n"
    "end\n"
    "assert(n.kernel == #r.kernels and n.s == n.f and n.s >= #r.kernels, 'kernel spans and flows')\n";

Test(cuda_profile, matmul_and_softmax_kernels_are_found_and_linked_to_their_ops_and_lines) {
  eng_engine_t *e = gpu_engine();
  run(e, matmul_softmax);
  eng_engine_free(e);
}

Test(cuda_profile, profiles_repeat_and_a_cpu_profile_on_a_gpu_machine_records_no_kernels) {
  eng_engine_t *e = gpu_engine();
  run(e,
      "local x = engine.randn({256, 256}, {device = 'cuda'})\n"
      "for i = 1, 3 do\n"
      "  local prof = engine.profile(function() local _ = x:matmul(x):sum() end)\n"
      "  assert(#prof.records.ops == 2 and #prof.records.kernels >= 2, 'profile ' .. i)\n"
      "end\n"
      "local prof = engine.profile(function() local _ = x:matmul(x) end, {cuda = false})\n"
      "assert(#prof.records.kernels == 0 and #prof.records.ops == 1)");
  eng_engine_free(e);
}

Test(cuda_profile, e88_forward_and_backward_kernels_are_found_by_name) {
  eng_engine_t *e = gpu_engine();
  if (eng_engine_run_string(e, "assert(engine.F.e88 and engine.Tensor.backward)", "probe") != 0)
    cr_skip_test("engine.F.e88 or autograd's backward is not in this build");
  run(e,
      "local B, T, H, n = 2, 64, 4, 32\n"
      "local o = {device = 'cuda', dtype = 'bf16'}\n"
      "local q, k = engine.randn({B, T, H, n}, o), engine.randn({B, T, H, n}, o)\n"
      "local v, g = engine.randn({B, T, H, n}, o), engine.randn({B, T, H, n}, o)\n"
      "local decay = engine.rand({B, T, H}, o)\n"
      "for _, x in ipairs{q, k, v, g} do x:requires_grad(true) end\n"
      "local prof = engine.profile(function()\n"
      "  local y = engine.F.e88(q, k, v, decay, g)\n"
      "  y:float():sum():backward()\n"
      "end, {warmup = 1})\n"
      "local fwd, bwd\n"
      "for _, kr in ipairs(prof.records.kernels) do\n"
      "  local low = kr.name:lower()\n"
      "  if low:find('e88') and low:find('forward') then fwd = kr end\n"
      "  if low:find('e88') and low:find('backward') then bwd = kr end\n"
      "end\n"
      "assert(fwd and fwd.op_name == 'e88' and fwd.phase == 'forward', 'the E88 forward kernel')\n"
      "assert(bwd and bwd.phase == 'backward', 'the E88 backward kernel')\n"
      "local s = prof:summary{group = {['E88 fwd'] = 'e88.*forward', ['E88 bwd'] = 'e88.*backward'}}\n"
      "for _, r in ipairs(s.groups) do if r.name ~= 'Other' then assert(r.ms > 0, r.name) end end");
  eng_engine_free(e);
}
