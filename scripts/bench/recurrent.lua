-- The recurrent kernels' benchmark: forward and backward per layer call, each beside its floor and
-- the published anchor, the peak bytes one call allocates, and (with --peer) PyTorch eager's
-- forward and backward from scripts/peers/torch_recurrent.py run on the same machine, with the
-- ratios torch / ours (scripts/bench/run_recurrent.sh runs both).
--
--   engine run scripts/bench/recurrent.lua [--peer torch_recurrent.json] [--quick] [--only NAME]
--                                          [--cpu] [--ckpt-every C]
--
-- `cases` is a table: one row per shape, `kind` naming its runner in `runners` (e88, e1, e23).
-- Times are medians of CUDA-event timings over repeats after warm-up (host clock on the CPU).
-- Without a GPU the CPU runs a tiny size of each kind, so the script stays runnable everywhere
-- (those numbers are not for PERF.md). The peer's numbers are looked up by case name, so its CPU
-- smoke run (torch without CUDA) fills the tiny rows too. Exit status 1 when a case failed.
local engine = engine or require "engine"

local script_dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local json = dofile(script_dir .. "/json.lua")

local USAGE = [[
usage: engine run scripts/bench/recurrent.lua [--peer FILE.json] [--quick] [--only NAME] [--cpu]
                                              [--ckpt-every C]
  --peer   the JSON that scripts/peers/torch_recurrent.py wrote on this machine (adds PyTorch's
           forward and backward and the ratios torch / ours; an unreadable file only warns)
  --quick  few repeats (a smoke run; the numbers are not for PERF.md)
  --only   only the cases whose name contains NAME (plain substring)
  --ckpt-every
           the checkpoint interval of E88 and E23, in steps (default: each op's own, E88's 8 at
           n = 32 else 16, E23's 16): a shorter one replays less in the backward and saves more
           in the forward
  --cpu    the CPU's tiny rows even where a GPU is present]]

local cli = dofile(script_dir .. "/cli.lua")
local opts = cli.parse("recurrent.lua", USAGE, {...},
                       {flags = {"quick", "cpu"}, values = {"only", "peer"},
                        numbers = {["ckpt-every"] = {what = "steps", whole = true, least = 1}}})
local CKPT_EVERY = opts["ckpt-every"]  -- nil: the ops' defaults (each call is given nil)

-- The PyTorch peer's results (scripts/peers/torch_recurrent.py), keyed by case name.
local peer, peer_cases = nil, {}
if opts.peer then
  local ok, v = pcall(json.read, opts.peer)
  if ok and type(v) == "table" and type(v.cases) == "table" then
    peer, peer_cases = v, v.cases
  else
    io.stderr:write("recurrent.lua: WARNING: cannot read the peer results (",
                    ok and "no \"cases\" object in " .. opts.peer or tostring(v),
                    "); no PyTorch columns\n")
  end
end

local cuda = engine.cuda
local on_gpu = not opts.cpu and cuda and cuda.is_available and cuda.is_available()
local dev = on_gpu and "cuda" or "cpu"
local WARM, REPS = opts.quick and 2 or 5, opts.quick and 3 or 15

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) / 2] or (xs[n / 2] + xs[n / 2 + 1]) / 2
end

-- Microseconds per call of fn: CUDA events around each call on the GPU, the host clock on the CPU.
local ev0, ev1 = on_gpu and cuda.Event(), on_gpu and cuda.Event()
local function time_us(fn)
  for _ = 1, WARM do fn() end
  if on_gpu then cuda.synchronize() end
  local times = {}
  for r = 1, REPS do
    if on_gpu then
      ev0:record()
      fn()
      ev1:record()
      ev1:synchronize()
      times[r] = ev0:elapsed(ev1) * 1000
    else
      local t0 = engine.clock()
      fn()
      times[r] = (engine.clock() - t0) * 1e6
    end
  end
  return median(times)
end

-- Peak bytes that one call of fn allocates beyond what is live before it (GPU only).
local function peak_bytes(fn)
  if not on_gpu then return nil end
  collectgarbage()
  cuda.synchronize()
  local base = cuda.memory_allocated()
  cuda.reset_peak_memory_stats()
  local keep = {fn()}
  cuda.synchronize()
  local peak = cuda.max_memory_allocated() - base
  keep = nil
  return peak
end

-- The machine, for the floors.
local machine = {sm = 132, clock_hz = 1.755e9, bw = 3.35e12, name = "cpu"}
if on_gpu then
  local p = cuda.properties()
  machine = {sm = p.sm_count, clock_hz = p.clock_khz * 1e3, name = p.name,
             bw = 2 * p.memory_clock_khz * 1e3 * p.memory_bus_bits / 8}
end

-- ---------------- E88 ----------------

local runners = {}

-- floors: the SFU (one tanh per state element and step: 16 per clock per SM), the bytes moved,
-- and the dependent chain (T steps of ~100 cycles: 8 FMAs, the column shuffles, an FMA, a tanh).
local function e88_floors(c, bwd, nck)
  local elems = c.B * c.T * c.H * c.n * c.v
  local sfu = elems / (machine.sm * 16 * machine.clock_hz) * 1e6
  local io = c.B * c.T * c.H * (2 * c.n + 2 * c.v + 1) * 2 + c.B * c.H * nck * c.n * c.v * 4
  -- the backward also reads ckpt's trace: delta and o of every step, in f32
  local trace = c.B * c.T * c.H * c.v * 2 * 4
  local y = c.B * c.T * c.H * c.v * 2
  local bytes = bwd and (2 * io + y + trace) or (io + y)
  local bw = bytes / machine.bw * 1e6
  local chain = c.T * 100 / machine.clock_hz * 1e6
  return math.max(sfu, bw, chain), string.format("sfu %.0f, bytes %.0f, chain %.0f", sfu, bw, chain)
end

function runners.e88(c, dtype)
  local o = {dtype = dtype, device = dev}
  local F = engine.F
  local q = engine.randn({c.B, c.T, c.H, c.n}, o)
  local k = engine.randn({c.B, c.T, c.H, c.n}, o)
  local v = engine.randn({c.B, c.T, c.H, c.v}, o)
  local g = engine.randn({c.B, c.T, c.H, c.v}, o)
  local decay = engine.rand({c.B, c.T, c.H}, o) * 0.5 + 0.5
  local S0 = engine.zeros({c.B, c.H, c.n, c.v}, {dtype = dtype == "f64" and "f64" or "f32", device = dev})
  local fo, bo = {state = S0, ckpt_every = CKPT_EVERY}, {ckpt_every = CKPT_EVERY}
  local y, S_T, ckpt = F.e88_forward(q, k, v, decay, g, fo)
  -- the checkpoints the forward wrote: ckpt [B,H,W], W = nck n v + 2 T v
  local nck = math.floor((ckpt:shape()[3] - 2 * c.T * c.v) / (c.n * c.v))
  local dy = engine.randn({c.B, c.T, c.H, c.v}, o)
  local function bwd() return F.e88_backward(q, k, v, decay, g, S0, ckpt, dy, nil, bo) end
  local r = {}
  r.fwd = time_us(function() return F.e88(q, k, v, decay, g, fo) end)
  r.fwd_ckpt = time_us(function() return F.e88_forward(q, k, v, decay, g, fo) end)
  r.bwd = time_us(bwd)
  r.fwd_peak = peak_bytes(function() return F.e88_forward(q, k, v, decay, g, fo) end)
  r.bwd_peak = peak_bytes(bwd)
  r.fwd_floor, r.fwd_floor_why = e88_floors(c, false, nck)
  r.bwd_floor, r.bwd_floor_why = e88_floors(c, true, nck)
  r.nck = nck
  return r
end

-- ---------------- E1 / E23 ----------------
-- Floors per layer call: the bytes of the sequences read and written once (and the weights once)
-- at HBM bandwidth, the weight-gradient GEMMs at the bf16 tensor peak (backward), and the chain:
-- T dependent steps of at least one distributed-shared-memory exchange and cluster barrier each
-- (taken as 0.5 us, about 900 cycles; E23 needs two a step forward, four backward with the replay).
local BARRIER_US, TENSOR_FLOPS = 0.5, 990e12
local function e_floors(c, seq_bytes, gemm_flops, barriers)
  local bw = seq_bytes / machine.bw * 1e6
  local mma = gemm_flops / TENSOR_FLOPS * 1e6
  local chain = c.T * barriers * BARRIER_US
  return math.max(bw + mma, chain), string.format("bytes %.0f, gemm %.0f, chain %.0f", bw, mma, chain)
end

local function e_inputs(c, dtype)
  local o = {dtype = dtype, device = dev}
  return o, engine.randn({c.B, c.T, c.d}, o), engine.randn({c.d, c.d}, o) * (1 / math.sqrt(c.d)),
    engine.randn({c.d}, o) * 0.1, engine.randn({c.B, c.d}, o) * 0.5
end

function runners.e1(c, dtype)
  local F = engine.F
  local o, xw, W, b, h0 = e_inputs(c, dtype)
  local z = engine.randn({c.B, c.T, c.d}, o)
  local _, _, hs = F.e1_forward(xw, z, W, b, {state = h0})
  local dy = engine.randn({c.B, c.T, c.d}, o)
  local r = {}
  r.fwd = time_us(function() return F.e1_forward(xw, z, W, b, {state = h0}) end)
  r.bwd = time_us(function() return F.e1_backward(z, W, h0, hs, dy, nil) end)
  r.fwd_peak = peak_bytes(function() return F.e1_forward(xw, z, W, b, {state = h0}) end)
  r.bwd_peak = peak_bytes(function() return F.e1_backward(z, W, h0, hs, dy, nil) end)
  local seq, w = c.B * c.T * c.d * 2, c.d * c.d * 2
  r.fwd_floor, r.fwd_floor_why = e_floors(c, 4 * seq + w, 0, 1)
  r.bwd_floor, r.bwd_floor_why = e_floors(c, 7 * seq + 2 * w, 2 * c.B * c.T * c.d * c.d, 1)
  r.extra = string.format("per step: fwd %.2f us (target 1.5, published 9.1), bwd %.2f us (target 3)",
                          r.fwd / c.T, r.bwd / c.T)
  return r
end

function runners.e23(c, dtype)
  local F = engine.F
  local o, xw, Wh, b, h0 = e_inputs(c, dtype)
  local Ww = engine.randn({c.d, c.d}, o) * (1 / math.sqrt(c.d))
  local tape0 = engine.randn({c.B, c.N, c.d}, o) * 0.5
  local opts = {state = h0, tape = tape0, ckpt_every = CKPT_EVERY}
  local hs, _, _, ck = F.e23_forward(xw, Wh, Ww, b, opts)
  -- the checkpoints the forward wrote: ck [B,W], W = nck N d + T (2 N + d)
  local nck = math.floor((ck:shape()[2] - c.T * (2 * c.N + c.d)) / (c.N * c.d))
  local dhs = engine.randn({c.B, c.T, c.d}, o)
  local function bwd() return F.e23_backward(xw, Wh, Ww, b, h0, hs, ck, dhs, nil, nil, {ckpt_every = CKPT_EVERY}) end
  local r = {}
  r.fwd = time_us(function() return F.e23_forward(xw, Wh, Ww, b, opts) end)
  r.bwd = time_us(bwd)
  r.fwd_peak = peak_bytes(function() return F.e23_forward(xw, Wh, Ww, b, opts) end)
  r.bwd_peak = peak_bytes(bwd)
  local seq, w = c.B * c.T * c.d * 2, c.d * c.d * 2
  -- ckpt (f32): the tape checkpoints, then the a, r and w trace of every step
  local ck_bytes = c.B * (nck * c.N * c.d + c.T * (2 * c.N + c.d)) * 4
  r.fwd_floor, r.fwd_floor_why = e_floors(c, 2 * seq + 2 * w + ck_bytes, 0, 2)
  r.bwd_floor, r.bwd_floor_why = e_floors(c, 6 * seq + 4 * w + ck_bytes, 4 * c.B * c.T * c.d * c.d, 4)
  r.extra = string.format("per step: fwd %.2f us (target 3, published 24.3), bwd %.2f us (target 6)",
                          r.fwd / c.T, r.bwd / c.T)
  return r
end

local E1_ANCHOR = {fwd = 9.1 * 512, where = "E1 9.1 us/step (GEMM + kernel a step)"}
local E23_ANCHOR = {fwd = 24.3 * 512, where = "E23 24.3 us/step"}

-- ---------------- the cases ----------------

local E88_ANCHOR = {fwd = 1065, bwd = 2962, where = "published kernels, RTX 4090"}
local cases = {
  {name = "e88 layer", kind = "e88", B = 8, T = 512, H = 83, n = 32, v = 32, anchor = E88_ANCHOR,
   target = {fwd = 250, bwd = 600}},
  {name = "e88 B=16", kind = "e88", B = 16, T = 512, H = 83, n = 32, v = 32},
  {name = "e88 T=2048", kind = "e88", B = 8, T = 2048, H = 83, n = 32, v = 32},
  {name = "e88 n=v=64", kind = "e88", B = 8, T = 512, H = 41, n = 64, v = 64},
  {name = "e88 tiny (cpu)", kind = "e88", B = 1, T = 32, H = 2, n = 16, v = 16, cpu = true},
  -- E1 / E23 (shape: batch, steps, d, and the tape's slots for E23)
  {name = "e1 B4 d512", kind = "e1", B = 4, T = 512, d = 512, anchor = E1_ANCHOR},
  {name = "e1 B4 d768", kind = "e1", B = 4, T = 512, d = 768, anchor = E1_ANCHOR},
  {name = "e1 B64 d512", kind = "e1", B = 64, T = 512, d = 512, anchor = E1_ANCHOR},
  {name = "e1 B64 d768", kind = "e1", B = 64, T = 512, d = 768, anchor = E1_ANCHOR},
  {name = "e1 tiny (cpu)", kind = "e1", B = 2, T = 32, d = 32, cpu = true},
  {name = "e23 B4 N8", kind = "e23", B = 4, T = 512, d = 512, N = 8, anchor = E23_ANCHOR},
  {name = "e23 B4 N64", kind = "e23", B = 4, T = 512, d = 512, N = 64, anchor = E23_ANCHOR},
  {name = "e23 B64 N8", kind = "e23", B = 64, T = 512, d = 512, N = 8, anchor = E23_ANCHOR},
  {name = "e23 B64 N64", kind = "e23", B = 64, T = 512, d = 512, N = 64, anchor = E23_ANCHOR},
  {name = "e23 tiny (cpu)", kind = "e23", B = 2, T = 32, d = 32, N = 8, cpu = true},
}

-- ---------------- run and print ----------------

local function mib(b) return b and string.format("%.1f", b / 2 ^ 20) or "-" end
local function fmt(x) return x and string.format("%.0f", x) or "-" end

-- The peer's number for a case (nil when absent, null or failed) and the ratio torch / ours.
local function peer_of(name, key)
  local c = peer_cases[name]
  local v = type(c) == "table" and c[key] or nil
  return type(v) == "number" and v or nil
end
local function ratio(t, ours)
  return t and ours and ours > 0 and string.format("%.2f", t / ours) or "-"
end
local PEER_COLS = " %9s %7s %9s %7s"

print(string.format("recurrent kernels on %s (%s); times in us per layer call, median of %d%s; " ..
                    "%s", dev, machine.name, REPS, opts.quick and " (--quick: smoke numbers)" or "",
                    CKPT_EVERY and
                      string.format("E88 and E23 checkpoint every %d steps", CKPT_EVERY) or
                      "E88 and E23 checkpoint at their ops' default intervals"))
if peer then
  local m = type(peer.meta) == "table" and peer.meta or {}
  local function s(x) return (x == nil or x == json.null) and "?" or tostring(x) end
  print(string.format("PyTorch peer: %s (torch %s, CUDA %s) on %s, %s, median of %s%s",
                      opts.peer, s(m.torch), s(m.cuda), s(m.device), s(m.date), s(m.reps),
                      m.quick == true and " (--quick: smoke numbers)" or ""))
  if m.device ~= machine.name then
    print("WARNING: the peer ran on another device (" .. s(m.device) .. ") than ours (" ..
          machine.name .. "); the ratios are not comparable")
  end
elseif opts.peer then
  print("PyTorch peer: none (" .. opts.peer .. " could not be read)")
end
print(string.format("%-16s %-22s %8s %8s %8s %7s %8s %8s %8s %7s", "case", "shape",
                    "fwd", "floor", "anchor", "x", "bwd", "floor", "anchor", "bwd/fwd") ..
      (peer and string.format(PEER_COLS, "torch fwd", "t/o fwd", "torch bwd", "t/o bwd") or "") ..
      string.format(" %9s %9s  %s", "fwd MiB", "bwd MiB", "floor terms (fwd | bwd)"))
local failures, results = {}, {}
for _, c in ipairs(cases) do
  local want = opts.only == nil or c.name:find(opts.only, 1, true)
  if want and (on_gpu and not c.cpu or not on_gpu and c.cpu) then
    local dtype = on_gpu and "bf16" or "f32"
    local ok, r = pcall(runners[c.kind], c, dtype)
    local shape = c.d and string.format("B%d T%d d%d%s", c.B, c.T, c.d, c.N and (" N" .. c.N) or "")
      or string.format("B%d T%d H%d n%d v%d", c.B, c.T, c.H, c.n or 0, c.v or 0)
    local t_fwd, t_bwd = peer_of(c.name, "fwd_us"), peer_of(c.name, "bwd_us")
    if not ok then
      failures[#failures + 1] = c.name .. ": " .. tostring(r)
      print(string.format("%-16s %-22s failed: %s%s", c.name, shape, tostring(r),
                          (t_fwd or t_bwd) and string.format(" (PyTorch: fwd %s us, bwd %s us)",
                                                             fmt(t_fwd), fmt(t_bwd)) or ""))
    else
      local a = c.anchor or {}
      results[#results + 1] = {name = c.name, fwd = r.fwd, bwd = r.bwd, torch_fwd = t_fwd,
                               torch_bwd = t_bwd}
      print(string.format("%-16s %-22s %8s %8s %8s %7s %8s %8s %8s %7.2f",
                          c.name, shape, fmt(r.fwd), fmt(r.fwd_floor), fmt(a.fwd),
                          a.fwd and string.format("%.2f", a.fwd / r.fwd) or "-", fmt(r.bwd),
                          fmt(r.bwd_floor), fmt(a.bwd), r.bwd / r.fwd) ..
            (peer and string.format(PEER_COLS, fmt(t_fwd), ratio(t_fwd, r.fwd), fmt(t_bwd),
                                    ratio(t_bwd, r.bwd)) or "") ..
            string.format(" %9s %9s  %s | %s", mib(r.fwd_peak), mib(r.bwd_peak),
                          r.fwd_floor_why, r.bwd_floor_why))
      if r.extra then print(string.format("%-16s %-22s %s", "", "", r.extra)) end
      if r.fwd_ckpt then
        print(string.format("%-16s %-22s fwd with checkpoints (e88_forward, %d of them): %s us%s",
                            "", "", r.nck, fmt(r.fwd_ckpt), c.target and string.format(
                              "; targets fwd <= %d, bwd <= %d and <= 2.5x fwd", c.target.fwd,
                              c.target.bwd) or ""))
      end
    end
    local pc = peer and peer_cases[c.name]
    if type(pc) == "table" then
      local m = type(peer.meta) == "table" and peer.meta or {}
      if type(pc.error) == "string" then
        print(string.format("%-16s %-22s PyTorch failed: %s", "", "", pc.error))
      elseif type(pc.reps) == "number" and type(m.reps) == "number" and pc.reps < m.reps then
        print(string.format("%-16s %-22s PyTorch: median of %d repeats only (a slow case)", "",
                            "", pc.reps))
      end
    end
    collectgarbage()
  end
end
print("x = anchor / ours (above 1: faster than the published kernels); anchor: " .. E88_ANCHOR.where)
print("E1 / E23 anchors (forward only, T = 512): " .. E1_ANCHOR.where .. "; " .. E23_ANCHOR.where)
if peer then
  print("torch fwd / bwd: PyTorch eager (a Python loop over T, autograd backward) from " ..
        opts.peer .. "; t/o = torch / ours (above 1: we are faster)")
end
cli.exit_on_failures("recurrent.lua", failures)
-- Run as a chunk (loadfile(...)(args)), the script returns its rows: {name, fwd, bwd, torch_fwd,
-- torch_bwd} in microseconds, the peer's nil where it has none.
return results
