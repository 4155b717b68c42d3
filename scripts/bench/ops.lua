-- The CUDA backend's op benchmark: host launch cost, graph replay, bandwidth-bound ops on 64 MiB
-- bf16 tensors, and bf16 GEMMs, each beside its floor and (with --peer) PyTorch's number from
-- scripts/peers/torch_ops.py run on the same machine (scripts/bench/run_ops.sh runs both).
--
--   engine run scripts/bench/ops.lua [--peer torch_ops.json] [--out ops.json|ops.csv] [--quick]
--                                    [--peak TFLOPS]
--
-- Times are medians over repeats after warm-up. GPU times come from CUDA events around a batch of
-- calls, recorded once the GPU is already busy (one untimed call goes first) so that the host's
-- launch gap before the batch does not count. Host times come from engine.clock().
local engine = engine or require "engine"

local script_dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local json = dofile(script_dir .. "/json.lua")

local USAGE = [[
usage: engine run scripts/bench/ops.lua [--peer FILE.json] [--out FILE.json|FILE.csv]
                                        [--quick] [--peak TFLOPS]
  --peer   the JSON that scripts/peers/torch_ops.py wrote on this machine (adds PyTorch's column)
  --out    also write the table: CSV when the name ends in .csv, else JSON (may be repeated)
  --quick  few repeats (a smoke run; the numbers are not for PERF.md)
  --peak   the dense bf16 peak in TFLOP/s for the GEMM floor (default: from the GPU's name)]]

-- ---- arguments ----

local cli = dofile(script_dir .. "/cli.lua")
local opts = cli.parse("ops.lua", USAGE, {...},
                       {flags = {"quick"}, values = {"peer"}, lists = {"out"},
                        numbers = {peak = {what = "TFLOP/s"}}})

local cuda = engine.cuda
if not (cuda and cuda.is_available and cuda.is_available()) then
  io.stderr:write("ops.lua: no GPU: this benchmark runs on CUDA only ",
                  cuda and "(engine.cuda.is_available() is false)"
                    or "(this engine has no engine.cuda: built without CUDA)", "\n")
  os.exit(1)
end
for _, name in ipairs {"Event", "graph", "synchronize", "properties"} do
  if not cuda[name] then
    io.stderr:write("ops.lua: engine.cuda.", name, " is missing from this build\n")
    os.exit(1)
  end
end

local peer, peer_cases = nil, {}
if opts.peer then
  local ok, v = pcall(json.read, opts.peer)
  if not ok then
    io.stderr:write("ops.lua: cannot read the peer results: ", tostring(v), "\n")
    os.exit(1)
  end
  peer = v
  peer_cases = type(v.cases) == "table" and v.cases or {}
end

-- ---- the machine ----

local props = cuda.properties()
local gpu_name = props.name or "?"
-- Dense bf16 tensor-core peaks (no sparsity), from NVIDIA's data sheets.
local function bf16_peak(name)
  if opts.peak then return opts.peak, "given with --peak" end
  if name:find("H100") and name:find("PCIe") then return 756, "H100 PCIe data sheet" end
  if name:find("H100") and name:find("NVL") then return 835, "H100 NVL data sheet" end
  for _, known in ipairs {"H100", "H200", "H800", "GH200"} do
    if name:find(known, 1, true) then return 989.4, "H100/H200 SXM data sheet" end
  end
  return 989.4, "ASSUMED H100/H200 SXM for an unknown GPU: pass --peak"
end
local PEAK_TFLOPS, peak_source = bf16_peak(gpu_name)

-- ---- timing ----

local REPS = opts.quick and 3 or 15
local WARM = opts.quick and 2 or 5

local function median(xs)
  local s = {}
  for i, v in ipairs(xs) do s[i] = v end
  table.sort(s)
  local n = #s
  if n == 0 then return 0 / 0 end
  if n % 2 == 1 then return s[(n + 1) / 2] end
  return (s[n / 2] + s[n / 2 + 1]) / 2
end

local ev0, ev1 = cuda.Event(), cuda.Event()

-- GPU microseconds per call of fn: events around `inner` calls, median over REPS batches.
local function gpu_us(fn, inner)
  for _ = 1, WARM do fn() end
  cuda.synchronize()
  local times = {}
  for r = 1, REPS do
    fn() -- untimed: the GPU is busy when ev0 is recorded
    ev0:record()
    for _ = 1, inner do fn() end
    ev1:record()
    ev1:synchronize()
    times[r] = ev0:elapsed(ev1) * 1000 / inner
  end
  return median(times)
end

-- Host microseconds per call of fn (launch only: the sync after each batch is not counted).
local function host_us(fn, inner)
  for _ = 1, WARM * inner do fn() end
  cuda.synchronize()
  local times = {}
  for r = 1, REPS do
    local t0 = engine.clock()
    for _ = 1, inner do fn() end
    local t1 = engine.clock()
    cuda.synchronize()
    times[r] = (t1 - t0) * 1e6 / inner
  end
  return median(times)
end

-- Host microseconds from a call to its result being ready (call + synchronize), median of calls.
local function latency_us(fn, calls)
  for _ = 1, WARM * 10 do fn() end
  cuda.synchronize()
  local times = {}
  for r = 1, calls do
    local t0 = engine.clock()
    fn()
    cuda.synchronize()
    times[r] = (engine.clock() - t0) * 1e6
  end
  return median(times)
end

-- ---- the cases ----

local BF16 = {dtype = "bf16", device = "cuda"}
local ROWS, COLS = 8192, 4096 -- 32 Mi elements: 64 MiB in bf16
local MB64 = ROWS * COLS * 2
engine.manual_seed(0)

local results = {} -- in table order: {name=, what=, us=, bytes=, flops=, target=, check=, ...}
local failures = {} -- "case: message" for cases that raised an error
local function add(r) results[#results + 1] = r end

-- Runs one measurement; an error is recorded (the case gets no row) and the run goes on.
local function case(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if not ok then
    failures[#failures + 1] = name .. ": " .. tostring(err)
    io.stderr:write("ops.lua: case ", name, " failed: ", (tostring(err):match("^[^\n]*")), "\n")
    pcall(cuda.synchronize)
    collectgarbage()
  end
end

-- (a) host time per tiny op launched from Lua
case("launch_add_1x1", function()
  local x, y = engine.randn({1, 1}, BF16), engine.randn({1, 1}, BF16)
  add {name = "launch_add_1x1",
       what = "x + y on [1,1] bf16, host time per launch (no sync between)",
       us = host_us(function() local _ = x + y end, 500), target = "<= 3 us",
       check = function(r) return r.us <= 3 end}
end)

-- (b) 100 tiny ops captured in one graph, replayed
case("graph_add_x100", function()
  local a, b = engine.randn({1, 1}, BF16), engine.randn({1, 1}, BF16)
  local function chain()
    local z = a
    for _ = 1, 100 do z = z + b end
    return z
  end
  local captured
  local g = cuda.graph(function() captured = chain() end)
  g:replay()
  local eager = chain()
  cuda.synchronize()
  local gv, ev = captured:to("f64"):tolist()[1][1], eager:to("f64"):tolist()[1][1]
  local same = gv == ev
  if not same then
    io.stderr:write(string.format("ops.lua: WARNING: graph replay gave %.9g, eager %.9g\n", gv, ev))
  end
  local replays = opts.quick and 5 or 20
  add {name = "graph_add_x100", what = "100 chained [1,1] bf16 adds in one graph, GPU time per op",
       us = gpu_us(function() g:replay() end, replays) / 100, target = "<= 1 us",
       check = function(r) return r.us <= 1 end,
       note = not same and string.format("REPLAY DIFFERS FROM EAGER: %.9g vs %.9g", gv, ev) or nil}
  add {name = "graph_replay_host", what = "host time of one replay of that graph (100 ops)",
       us = host_us(function() g:replay() end, 20)}
end)

-- (c) bandwidth-bound ops on 64 MiB bf16 tensors; the copy is the measured ceiling
local NBUF = 3 -- inputs rotate (L2 is ~50 MB, so 64 MiB already misses it; this makes sure)
case("bandwidth inputs", function()
  local xs, ys = {}, {}
  for i = 1, NBUF do
    xs[i] = engine.randn({ROWS, COLS}, BF16)
    ys[i] = engine.randn({ROWS, COLS}, BF16)
  end
  local w = engine.randn({COLS}, BF16)
  local k = 0
  local function nxt()
    k = k % NBUF + 1
    return k
  end
  local function bw(name, what, bytes, fn)
    case(name, function()
      add {name = name, what = what, bytes = bytes, us = gpu_us(fn, 20), bw = true}
    end)
  end
  bw("copy_64MiB", "x:clone(), 64 MiB bf16 (read + write)", 2 * MB64,
     function() local i = nxt(); xs[i]:clone():free() end)
  bw("add_64MiB", "x + y, [8192,4096] bf16", 3 * MB64,
     function() local i = nxt(); (xs[i] + ys[i]):free() end)
  bw("mul_64MiB", "x * y, [8192,4096] bf16", 3 * MB64,
     function() local i = nxt(); (xs[i] * ys[i]):free() end)
  bw("silu_64MiB", "silu(x), [8192,4096] bf16", 2 * MB64,
     function() local i = nxt(); xs[i]:silu():free() end)
  bw("softmax_8192x4096", "softmax over rows of 4096, bf16", 2 * MB64,
     function() local i = nxt(); xs[i]:softmax(-1):free() end)
  bw("rms_norm_8192x4096", "rms_norm over rows of 4096 with a weight, bf16", 2 * MB64 + COLS * 2,
     function() local i = nxt(); engine.F.rms_norm(xs[i], w):free() end)
  for i = 1, NBUF do
    xs[i]:free()
    ys[i]:free()
  end
  w:free()
end)

-- (d) GEMMs
case("gemm_8192", function()
  local M = 8192
  local a, b = engine.randn({M, M}, BF16), engine.randn({M, M}, BF16)
  add {name = "gemm_8192", what = "[8192,8192] @ [8192,8192] bf16", flops = 2 * M * M * M,
       us = gpu_us(function() a:matmul(b):free() end, opts.quick and 2 or 5), gemm = true}
  a:free()
  b:free()
end)
do
  local x, W = engine.randn({4, 512}, BF16), engine.randn({512, 512}, BF16)
  local flops, bytes = 2 * 4 * 512 * 512, (4 * 512 * 2 + 512 * 512) * 2
  case("gemm_4x512x512", function()
    add {name = "gemm_4x512x512",
         what = "[4,512] @ [512,512] bf16, GPU time per call (200 in a row)",
         flops = flops, bytes = bytes, small = true,
         us = gpu_us(function() local _ = x:matmul(W) end, 200)}
  end)
  case("gemm_4x512x512_sync", function()
    add {name = "gemm_4x512x512_sync", what = "the same, host time of one call + synchronize",
         flops = flops, bytes = bytes, small = true,
         us = latency_us(function() local _ = x:matmul(W) end, opts.quick and 50 or 500)}
  end)
  case("linear_4x512x512", function()
    add {name = "linear_4x512x512",
         what = "F.linear(x, W) = x @ W^T, [4,512] by [512,512] bf16, GPU time per call",
         flops = flops, bytes = bytes,
         us = gpu_us(function() local _ = engine.F.linear(x, W) end, 200)}
  end)
end

-- ---- floors, PyTorch, targets ----

local function peer_us(name)
  local c = peer_cases[name]
  local v = type(c) == "table" and c.time_us or nil
  return type(v) == "number" and v or nil
end

-- The copy ceiling: the better of our copy and PyTorch's, both measured here.
local copy_bw_ours, copy_bw_torch
for _, r in ipairs(results) do
  if r.name == "copy_64MiB" then copy_bw_ours = r.bytes / (r.us * 1e-6) end
end
do
  local t = peer_us("copy_64MiB")
  copy_bw_torch = t and 2 * MB64 / (t * 1e-6) or nil
end
local COPY_BW = math.max(copy_bw_ours or 0, copy_bw_torch or 0)
local copy_source = (copy_bw_torch or 0) > (copy_bw_ours or 0) and "PyTorch's clone" or "our clone"
if COPY_BW == 0 then COPY_BW = nil end

local SMALL_GEMM_TORCH_REF = 19.6 -- us: PyTorch eager on an H200, from the issue

for _, r in ipairs(results) do
  r.torch_us = peer_us(r.name)
  if r.torch_us then r.speedup = r.torch_us / r.us end
  if r.bw then
    r.rate = r.bytes / (r.us * 1e-6) / 1e9
    r.torch_rate = r.torch_us and r.bytes / (r.torch_us * 1e-6) / 1e9
    r.rate_unit = "GB/s"
    if COPY_BW then
      r.floor_us = r.bytes / COPY_BW * 1e6
      r.pct = r.rate * 1e9 / COPY_BW * 100
    end
    if r.name ~= "copy_64MiB" then
      r.target = ">= 85% of copy BW"
      if r.pct then r.met = r.pct >= 85 end
    end
  elseif r.gemm then
    r.floor_us = r.flops / (PEAK_TFLOPS * 1e12) * 1e6
    r.rate = r.flops / (r.us * 1e-6) / 1e12
    r.torch_rate = r.torch_us and r.flops / (r.torch_us * 1e-6) / 1e12
    r.rate_unit = "TFLOP/s"
    r.pct = r.rate / PEAK_TFLOPS * 100
    r.target = ">= 95% of PyTorch"
    if r.torch_rate then r.met = r.rate >= 0.95 * r.torch_rate end
  elseif r.flops then
    r.floor_us = math.max(r.flops / (PEAK_TFLOPS * 1e12), COPY_BW and r.bytes / COPY_BW or 0) * 1e6
    if r.small then
      local ref = r.torch_us or SMALL_GEMM_TORCH_REF
      r.target = r.torch_us and "< PyTorch" or string.format("< %.1f us (PyTorch, issue)", ref)
      r.met = r.us < ref
    end
  end
  if r.check then r.met = r.check(r) end
end

-- ---- the table ----

local function fmt_us(v)
  if not v then return "-" end
  if v >= 1000 then return string.format("%.3f ms", v / 1000) end
  if v >= 100 then return string.format("%.1f us", v) end
  return string.format("%.2f us", v)
end
local function fmt_rate(v, unit, pct)
  if not v then return "-" end
  local s = string.format(v >= 100 and "%.0f %s" or "%.1f %s", v, unit)
  if pct then s = s .. string.format(" (%.0f%%)", pct) end
  return s
end

local header = {"case", "ours", "floor", "PyTorch", "PyTorch/ours", "ours rate", "PyTorch rate",
                "target", "met"}
local rows = {}
for _, r in ipairs(results) do
  local met = r.met == nil and (r.target and "n/a" or "-") or (r.met and "yes" or "NO")
  rows[#rows + 1] = {
    r.name, fmt_us(r.us), fmt_us(r.floor_us), fmt_us(r.torch_us),
    r.speedup and string.format("%.2fx", r.speedup) or "-",
    fmt_rate(r.rate, r.rate_unit, r.pct), fmt_rate(r.torch_rate, r.rate_unit),
    r.target or "-", met,
  }
end

local function print_table(head, body)
  local w = {}
  for c, h in ipairs(head) do
    w[c] = #h
    for _, row in ipairs(body) do w[c] = math.max(w[c], #row[c]) end
  end
  local function line(cells)
    local out = {}
    for c, v in ipairs(cells) do
      out[c] = c == 1 and v .. string.rep(" ", w[c] - #v) or string.rep(" ", w[c] - #v) .. v
    end
    print(table.concat(out, "  "))
  end
  line(head)
  local rule = {}
  for c = 1, #head do rule[c] = string.rep("-", w[c]) end
  print(table.concat(rule, "  "))
  for _, row in ipairs(body) do line(row) end
end

local date = os.date("!%Y-%m-%d %H:%M UTC")
print(string.format("engine %s ops benchmark on %s, %s%s", engine.version or "?", gpu_name, date,
                    opts.quick and " (--quick: smoke numbers)" or ""))
print(string.format("median of %d repeats after %d warm-up calls; GPU times from CUDA events",
                    REPS, WARM))
if peer then
  local m = type(peer.meta) == "table" and peer.meta or {}
  print(string.format("PyTorch peer: %s (torch %s, CUDA %s) on %s", opts.peer, tostring(m.torch),
                      tostring(m.cuda), tostring(m.device)))
  if m.device and m.device ~= gpu_name then
    print("WARNING: the peer ran on another GPU (" .. tostring(m.device) ..
          "); the ratios are not comparable")
  end
else
  print("PyTorch peer: none (--peer FILE adds it)")
end
print()
print_table(header, rows)
print()
if COPY_BW then
  print(string.format("copy ceiling: %.0f GB/s (%s; bytes read + written / time)",
                      COPY_BW / 1e9, copy_source))
else
  print("copy ceiling: unknown (the copy case failed here and in the peer): no bandwidth floors")
end
print(string.format("floors: bandwidth-bound ops = bytes moved / copy ceiling; "
                    .. "GEMM = flops / %.1f TFLOP/s dense bf16 (%s)",
                    PEAK_TFLOPS, peak_source))
print("PyTorch/ours = PyTorch time / our time (> 1: we are faster); "
      .. "rates count bytes read + written")
for _, r in ipairs(results) do
  local note = r.note and " [" .. r.note .. "]" or ""
  print(string.format("  %-20s %s%s", r.name, r.what, note))
end

-- ---- the files ----

local function write_csv(path)
  local f, err = io.open(path, "w")
  if not f then error("cannot write " .. tostring(err), 0) end
  local function csv(v)
    v = tostring(v)
    if v:find('[,"\n]') then v = '"' .. v:gsub('"', '""') .. '"' end
    return v
  end
  local cols = {"case", "ours_us", "floor_us", "torch_us", "torch_over_ours", "ours_rate",
                "torch_rate", "rate_unit", "pct", "target", "met", "what"}
  f:write(table.concat(cols, ","), "\n")
  for _, r in ipairs(results) do
    local cells = {r.name, r.us, r.floor_us or "", r.torch_us or "", r.speedup or "", r.rate or "",
                   r.torch_rate or "", r.rate_unit or "", r.pct or "", r.target or "",
                   r.met == nil and "" or tostring(r.met), r.what}
    for i, v in ipairs(cells) do cells[i] = csv(v) end
    f:write(table.concat(cells, ","), "\n")
  end
  f:close()
end

local function write_json(path)
  local cases, order = {}, {}
  for i, r in ipairs(results) do
    order[i] = r.name
    cases[r.name] = {
      what = r.what, time_us = r.us, floor_us = r.floor_us, torch_us = r.torch_us,
      torch_over_ours = r.speedup, rate = r.rate, torch_rate = r.torch_rate,
      rate_unit = r.rate_unit,
      pct = r.pct, target = r.target, met = r.met, bytes = r.bytes, flops = r.flops, note = r.note,
    }
  end
  json.write(path, {
    meta = {device = gpu_name, engine = engine.version, date = date, quick = opts.quick,
            reps = REPS, warmup = WARM, copy_ceiling_gbps = COPY_BW and COPY_BW / 1e9,
            copy_ceiling_from = copy_source, bf16_peak_tflops = PEAK_TFLOPS,
            bf16_peak_from = peak_source, peer = opts.peer, failures = failures},
    order = order, cases = cases,
  })
end

for _, path in ipairs(opts.out) do
  local ok, err = pcall(path:match("%.csv$") and write_csv or write_json, path)
  if not ok then
    io.stderr:write("ops.lua: ", path, ": ", tostring(err), "\n")
    os.exit(1)
  end
  print("wrote " .. path)
end

cli.exit_on_failures("ops.lua", failures)
