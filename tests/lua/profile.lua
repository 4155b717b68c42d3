-- engine.profile on the CPU: exact op counts, sane times, tables that add up, group patterns, Lua
-- line attribution, phases and peak memory, and a Chrome trace that parses as JSON with the
-- required fields. The GPU half of the reports (kernels, flows op -> kernel) is checked on
-- synthetic records through engine.profile.from_records; tests/test_cuda_profile.c checks real
-- CUPTI records on a GPU.
local t = require "spec"
local engine = require "engine"

local SPEC = debug.getinfo(1, "S").source:gsub("^@", "")
local ROOT = SPEC:match("^(.*)/tests/lua/[^/]*$")
local json = dofile(ROOT .. "/scripts/bench/json.lua")

local function here() return SPEC .. ":" .. debug.getinfo(2, "l").currentline end

local function count_by_name(ops)
  local n = {}
  for _, o in ipairs(ops) do n[o.name] = (n[o.name] or 0) + 1 end
  return n
end

-- A CPU workload of known ops; returns the lines that issued them.
local a = engine.randn({48, 64})
local b = engine.randn({64, 40})
local lines = {}
local function workload()
  for _ = 1, 3 do
    local c = a:matmul(b); lines.matmul = here()
    local s = c:softmax(-1); lines.softmax = here()
    local _ = s:sum(); lines.sum = here()
  end
end

t.case("every dispatched op is recorded once, in order, with positive times", function()
  local prof = engine.profile(workload, {cuda = false})
  local ops = prof.records.ops
  t.eq(#ops, 9, "ops recorded")
  local n = count_by_name(ops)
  t.eq({n.matmul, n.softmax, n.sum}, {3, 3, 3}, "matmul, softmax, sum calls")
  local names = {}
  for i, o in ipairs(ops) do
    names[i] = o.name
    t.eq(o.seq, i, "seq")
    t.eq(o.parent, 0, "top level")
    t.truthy(o.t1 > o.t0, "op " .. i .. " has a positive duration")
    if i > 1 then t.truthy(o.t0 >= ops[i - 1].t1, "op " .. i .. " starts after op " .. (i - 1) .. " ends") end
    t.eq(o.device, "cpu")
    t.eq(o.phase, "forward")
    t.eq(o.backward, false)
  end
  t.eq(names, {"matmul", "softmax", "sum", "matmul", "softmax", "sum", "matmul", "softmax", "sum"})
  t.eq(ops[1].inputs, "f32[48,64], f32[64,40]", "matmul inputs")
  t.eq(ops[2].inputs, "f32[48,40]", "softmax input")
  t.truthy(prof.records.wall_ns >= ops[9].t1, "the wall time covers the ops")
  t.eq(#prof.records.kernels, 0, "no kernels on a CPU profile")
  t.eq(engine._profile_running(), false)
end)

-- "name  1.234  45.6%  3  411.33" rows of a text table -> {name = {ms, pct, calls}}
local function parse_table(text)
  local rows = {}
  for line in text:gmatch("[^\n]+") do
    local name, ms, pc, calls = line:match("^(.-)%s+([%d%.]+)%s+([%d%.]+)%%%s+(%d+)%s+[%d%.%-]+$")
    if name then rows[#rows + 1] = {name = name, ms = tonumber(ms), pct = tonumber(pc), calls = tonumber(calls)} end
  end
  return rows
end

t.case("table rows and Other add up to Total; groups take matching ops", function()
  local prof = engine.profile(workload, {cuda = false})
  local text = prof:table {group = {Product = "matmul", Norm = "softmax|log_softmax"}}
  local rows = parse_table(text)
  t.eq(#rows, 4, "Product, Norm, Other, Total:\n" .. text)
  local by = {}
  for _, r in ipairs(rows) do by[r.name] = r end
  t.eq({by.Product.calls, by.Norm.calls, by.Other.calls, by.Total.calls}, {3, 3, 3, 9}, "calls")
  t.near(by.Product.ms + by.Norm.ms + by.Other.ms, by.Total.ms, 0.0025, "rows sum to Total")
  t.near(by.Product.pct + by.Norm.pct + by.Other.pct, 100, 0.002, "percentages")
  t.eq(rows[4].name, "Total", "Total comes last")
  -- the exact numbers, from summary(): group time = the ops' own times
  local s = prof:summary {group = {Product = "matmul", Norm = "softmax"}}
  local want = {}
  for _, o in ipairs(prof.records.ops) do want[o.name] = (want[o.name] or 0) + (o.t1 - o.t0) / 1e6 end
  local g = {}
  for _, r in ipairs(s.groups) do g[r.name] = r end
  t.near(g.Product.ms, want.matmul, 1e-12)
  t.near(g.Norm.ms, want.softmax, 1e-12)
  t.near(g.Other.ms, want.sum, 1e-12)
  t.near(s.totals.total_ms, want.matmul + want.softmax + want.sum, 1e-12)
  t.eq(s.totals.basis, "cpu")
  t.eq(g.Product.members, {"matmul"})
end)

t.case("ungrouped tables, top N folded into Other, and group order", function()
  local prof = engine.profile(workload, {cuda = false})
  local rows = parse_table(prof:table {top = 1})
  t.eq(#rows, 3, "one row, Other, Total")
  t.eq(rows[1].calls + rows[2].calls, 9)
  t.near(rows[1].ms + rows[2].ms, rows[3].ms, 0.0015)
  -- an array of groups is tried in order: the first match wins
  local s = prof:summary {group = {{"First", "mat"}, {"Second", "matmul|sum"}}}
  local g = {}
  for _, r in ipairs(s.groups) do g[r.name] = r end
  t.eq({g.First.calls, g.Second.calls, g.Other.calls}, {3, 3, 3})
  -- a group that matches nothing still has its row, at zero
  rows = parse_table(prof:table {group = {Nothing = "^zzz$"}})
  t.eq(rows[1].name, "Nothing")
  t.eq({rows[1].ms, rows[1].calls, rows[2].calls}, {0, 0, 9})
  t.truthy(prof:ops():find("softmax", 1, true), "ops table")
  local by_phase = parse_table(prof:table {by = "phase"})
  t.eq({by_phase[1].name, by_phase[1].calls}, {"forward", 9})
end)

t.case("each op names the Lua line that issued it", function()
  local prof = engine.profile(workload, {cuda = false})
  for _, o in ipairs(prof.records.ops) do
    t.eq(o.line, lines[o.name], o.name .. " line")
    t.eq(o.frame, lines[o.name], o.name .. " frame")
  end
  local s = prof:summary()
  local by_line = {}
  for _, r in ipairs(s.lines) do by_line[r.line] = r end
  for name, line in pairs(lines) do
    t.truthy(by_line[line], line .. " in summary().lines")
    t.eq(by_line[line].calls, 3, line .. " calls")
    t.eq(by_line[line].ops, {name})
  end
  local text = prof:lines()
  t.truthy(text:find(lines.matmul:sub(-40), 1, true), "lines() shows the matmul line:\n" .. text)
  -- ops issued inside the engine's own Lua code: line = the caller here, frame = inside lua/engine
  local where
  prof = engine.profile(function() local _ = engine.allclose(a, a); where = here() end, {cuda = false})
  t.truthy(#prof.records.ops > 0)
  for _, o in ipairs(prof.records.ops) do
    t.eq(o.line, where, o.name .. " line")
    t.truthy(o.frame:find("^lua/engine/init%.lua:%d+$"), o.name .. " frame is in init.lua: " .. o.frame)
  end
end)

t.case("phases: marked from Lua, with peak CPU memory", function()
  local big
  local prof = engine.profile(function(p)
    local _ = a:matmul(b)
    big = engine.zeros({512, 1024}) -- 2 MiB, alive from here on
    p:phase("optimizer")
    local _ = a:sum()
    engine.profile_phase("forward")
    local _ = b:sum()
  end, {cuda = false})
  local phases = {}
  for _, o in ipairs(prof.records.ops) do phases[#phases + 1] = o.name .. "@" .. o.phase end
  t.eq(phases, {"matmul@forward", "fill@forward", "sum@optimizer", "sum@forward"})
  local s = prof:summary()
  t.eq(#s.phases, 2, "forward and optimizer, each listed once")
  t.eq(s.phases[1].count, 2, "forward ran twice")
  t.truthy(s.memory.forward.peak_cpu >= 512 * 1024 * 4, "the forward peak holds the 2 MiB tensor")
  t.truthy(s.memory.optimizer.peak_cpu >= 512 * 1024 * 4)
  t.eq(s.memory.forward.peak_cuda, "n/a")
  t.truthy(prof:memory():find("optimizer", 1, true))
  big = nil
end)

if engine.Tensor.backward and engine.Tensor.requires_grad then
  t.case("autograd's backward pass is its own phase and flags its ops", function()
    local w = engine.randn({64, 40})
    w:requires_grad(true)
    local prof = engine.profile(function()
      local loss = a:matmul(w):sum()
      loss:backward()
      local _ = a:sum()
    end, {cuda = false})
    local back, last = 0, prof.records.ops[#prof.records.ops]
    for _, o in ipairs(prof.records.ops) do
      t.eq(o.backward, o.phase == "backward", o.name)
      if o.backward then back = back + 1 end
    end
    t.truthy(back > 0, "the backward pass dispatched ops")
    t.eq({last.phase, last.backward}, {"forward", false}, "forward resumes after backward")
  end)
end

-- A well-formed Chrome trace: the events and their required fields.
local function load_trace(path)
  local f = assert(io.open(path))
  local doc = json.decode(f:read("*a"))
  f:close()
  t.truthy(type(doc.traceEvents) == "table", "traceEvents")
  local by_ph = {}
  for _, e in ipairs(doc.traceEvents) do
    t.truthy(type(e.name) == "string" and type(e.ph) == "string", "name and ph")
    t.truthy(type(e.pid) == "number" and (e.ph == "M" or type(e.tid) == "number"), "pid and tid")
    if e.ph == "X" then
      t.truthy(type(e.ts) == "number" and type(e.dur) == "number" and e.dur >= 0, "ts and dur")
    end
    by_ph[e.ph] = by_ph[e.ph] or {}
    table.insert(by_ph[e.ph], e)
  end
  return doc, by_ph
end

t.case("save_trace writes valid Chrome trace JSON", function()
  local prof = engine.profile(workload, {cuda = false})
  local path = os.tmpname()
  prof:save_trace(path)
  local _, ev = load_trace(path)
  os.remove(path)
  t.eq(#ev.X, 9, "one span per op")
  local names = {}
  for _, m in ipairs(ev.M) do names[#names + 1] = m.args.name end
  t.truthy(table.concat(names, ","):find("CPU", 1, true), "the CPU process is named")
  for i, e in ipairs(ev.X) do
    local o = prof.records.ops[i]
    t.eq(e.name, o.name)
    t.eq(e.cat, "op")
    t.near(e.ts, o.t0 / 1e3, 1e-3)
    t.near(e.dur, (o.t1 - o.t0) / 1e3, 2e-3)
    t.eq(e.tid, o.thread)
    t.eq(e.args.line, lines[o.name])
    t.eq(e.args.inputs, o.inputs)
  end
end)

-- GPU-shaped records (what CUPTI gives on a GPU), built by hand.
local GEMM = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>(Params)"
local function synthetic()
  local ops = {
    {seq = 1, name = "matmul", t0 = 1000, t1 = 9000, parent = 0, thread = 7, device = "cuda",
     device_index = 0, inputs = "f32[8,8], f32[8,8]", backward = false, phase = "forward",
     line = "model.lua:10", frame = "model.lua:10"},
    {seq = 2, name = "softmax", t0 = 10000, t1 = 14000, parent = 0, thread = 7, device = "cuda",
     device_index = 0, inputs = "f32[8,8]", backward = false, phase = "forward",
     line = "model.lua:11", frame = "model.lua:11"},
  }
  local function k(name, t0, t1, corr, op)
    return {name = name, t0 = t0, t1 = t1, correlation = corr, op = op, stream = 13, device = 0,
            grid = {4, 2, 1}, block = {128, 1, 1}, registers = 64, static_smem = 1024,
            dynamic_smem = 2048}
  end
  return {
    ops = ops, wall_ns = 40000, cuda = true, dropped = 0,
    kernels = {k(GEMM, 20000, 26000, 101, 1), k("ampere_sgemm_128x64_nn", 26000, 28000, 102, 1),
               k("void eng_softmax_rows<float, 4>(float const*, float*, long)", 30000, 31000, 103, 2),
               k("void stray_kernel()", 32000, 32500, 104, 0)},
    copies = {{name = "memcpy HtoD", kind = "memcpy", t0 = 500, t1 = 900, bytes = 256,
               correlation = 100, op = 0, stream = 13, device = 0}},
    apis = {{name = "cudaLaunchKernel_v7000", t0 = 2000, t1 = 2500, correlation = 101, op = 1,
             thread = 7, driver = false}},
    phases = {{name = "forward", t0 = 0, t1 = 40000, peak_cpu = 100, peak_cuda = 4096}},
  }
end

t.case("GPU records: kernel tables, groups by kernel name, GPU time per op and line", function()
  local prof = engine.profile.from_records(synthetic())
  local s = prof:summary {group = {GEMM = "gemm|cublas|cutlass", Softmax = "softmax"}}
  local g = {}
  for _, r in ipairs(s.groups) do g[r.name] = r end
  t.near(g.GEMM.ms, 0.008, 1e-12)
  t.eq(g.GEMM.calls, 2)
  t.near(g.Softmax.ms, 0.001, 1e-12)
  t.near(g.Other.ms, 0.0009, 1e-12, "the stray kernel and the memcpy")
  t.near(s.totals.total_ms, 0.0099, 1e-12)
  t.eq(s.totals.basis, "gpu")
  local ops = {}
  for _, r in ipairs(s.ops) do ops[r.name] = r end
  t.near(ops.matmul.gpu_ms, 0.008, 1e-12)
  t.eq(ops.matmul.kernels, 2)
  local rows = parse_table(prof:table {by = "op"})
  local by = {}
  for _, r in ipairs(rows) do by[r.name] = r end
  t.eq(by.matmul.calls, 1, "one op launched both GEMM kernels")
  t.near(by.matmul.ms, 0.008, 1e-9)
  t.truthy(by["(outside ops)"], "work launched outside any op")
  rows = parse_table(prof:table {by = "line"})
  t.eq(rows[1].name, "model.lua:10")
  local text = prof:kernels {width = 120}
  t.truthy(text:find("cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>", 1, true),
           "demangled names without the parameter list:\n" .. text)
  t.truthy(text:find("4,2,1", 1, true) and text:find("128,1,1", 1, true), "grid and block")
  t.truthy(text:find("3072", 1, true), "shared memory, static + dynamic")
  t.eq(s.memory.forward.peak_cuda, 4096)
end)

t.case("GPU records: the trace has kernel spans per stream and flows from op to kernel", function()
  local prof = engine.profile.from_records(synthetic())
  local path = os.tmpname()
  prof:save_trace(path)
  local _, ev = load_trace(path)
  os.remove(path)
  local kernels, starts, finishes = {}, {}, {}
  for _, e in ipairs(ev.X) do
    if e.cat == "kernel" then kernels[#kernels + 1] = e end
  end
  t.eq(#kernels, 4)
  t.eq(kernels[1].name, GEMM, "the full name in the trace")
  t.eq({kernels[1].pid, kernels[1].tid}, {100, 13}, "GPU 0, stream 13")
  t.eq(kernels[1].args.grid, "4,2,1")
  t.eq(kernels[1].args.op, "matmul")
  t.eq(kernels[1].args.line, "model.lua:10")
  for _, e in ipairs(ev.s) do starts[e.id] = e end
  for _, e in ipairs(ev.f) do finishes[e.id] = e end
  t.eq(#ev.s, 3, "a flow per kernel with an op")
  t.eq(#ev.f, 3)
  for id, s in pairs(starts) do
    local f = finishes[id]
    t.truthy(f, "flow " .. id .. " ends")
    t.eq({s.pid, s.tid, f.pid, f.tid, f.bp}, {1, 7, 100, 13, "e"})
    t.truthy(f.ts >= s.ts, "the arrow goes forward in time")
  end
  t.near(starts[1].ts, 2.0, 1e-9, "the first arrow leaves at the runtime launch call")
  local copies = 0
  for _, e in ipairs(ev.X) do if e.cat == "memcpy" then copies = copies + 1 end end
  t.eq(copies, 1)
end)

t.case("misuse is a clear error, and an error inside fn stops the profile", function()
  t.raises(function() engine.profile("x") end, "profile: argument 1 must be a function")
  t.raises(function() engine.profile(workload, {bogus = 1}) end, "unknown option 'bogus'")
  local prof = engine.profile(workload, {cuda = false})
  t.raises(function() prof:table {by = "nope"} end, "by must be kernel, op, line, frame or phase")
  t.raises(function() prof:table {group = {Bad = "[a"}} end, "group 'Bad': bad pattern '[a'")
  t.raises(function() prof:table {group = {Empty = "|"}} end, "group 'Empty' has an empty pattern")
  t.raises(function()
    engine.profile(function() engine.profile(workload, {cuda = false}) end, {cuda = false})
  end, "a profile is already running")
  t.eq(engine._profile_running(), false, "stopped after the nested error")
  t.raises(function() engine.profile(function() error("boom") end, {cuda = false}) end, "boom")
  t.eq(engine._profile_running(), false, "stopped after an error in fn")
  if not engine._profile_cuda_available() then
    t.raises(function() engine.profile(workload, {cuda = true}) end, "cannot be recorded here")
  end
  t.eq(#engine.profile(workload, {cuda = false}).records.ops, 9, "profiles again")
  t.raises(function() engine._profile_stop() end, "no profile is running")
end)
