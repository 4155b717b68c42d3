-- Kernel-level profile of the 436.7M-parameter E88 ladder LM (dim 1920, depth 17, 83 heads,
-- n_state 32, bf16, B=8, T=512): warm up, profile 5 forward+backward steps (--optimizer adds the
-- AdamW step), and report where the time goes:
--   the breakdown (GEMM, E88 backward, E88 forward, Other, Total), the E88 kernel analysis, the top
--   kernels, the GEMMs' achieved TFLOP/s against the GPU's peak and the E88 kernels against their
--   memory floor, and peak memory per phase; plus e88_profile_trace.json (Perfetto) and
--   e88_profile_breakdown.svg.
-- Without a GPU it runs a small configuration on the CPU (op wall times instead of kernels).
--   engine run scripts/profile_e88.lua [--help]
local engine = require "engine"
local plot = engine.plot

local USAGE = [[
usage: engine run scripts/profile_e88.lua [options]

  --dim N --depth N --heads N --n-state N   model (default 1920, 17, 83, 32; CPU: 128, 2, 4, 32)
  --batch N --seq-len N      tokens per step (default 8 x 512; CPU: 2 x 64)
  --dtype NAME               bf16 (default on GPU) or f32 (default on CPU)
  --iters N                  profiled steps (default 5); --warmup N unprofiled ones (default 2)
  --optimizer                include the AdamW step in each profiled step
  --device NAME              cuda or cpu (default: engine.device())
  --top N                    kernels listed (default 15)
  --peak-tflops X            dense bf16 peak of the GPU (default: from the SM count and clock)
  --bandwidth-gbs X          memory bandwidth of the GPU (default: from the memory clock and bus)
  --trace PATH               Chrome trace (default e88_profile_trace.json)
  --plot PATH                breakdown bar chart (default e88_profile_breakdown.svg)
  -h, --help                 this text]]

local FLAGS = {dim = "int", depth = "int", heads = "int", ["n-state"] = "int", batch = "int",
               ["seq-len"] = "int", dtype = "string", iters = "int", warmup = "count",
               optimizer = "bool", device = "string", top = "int", ["peak-tflops"] = "number",
               ["bandwidth-gbs"] = "number", trace = "string", plot = "string"}

local o = engine.cli.parse("profile_e88", FLAGS, arg or {...}, USAGE)
if not o then return end

local device = o.device or engine.device()
local gpu = device:find("^cuda") ~= nil
local cfg = {
  dim = o.dim or (gpu and 1920 or 128), depth = o.depth or (gpu and 17 or 2),
  heads = o.heads or (gpu and 83 or 4), n_state = o["n-state"] or 32,
  batch = o.batch or (gpu and 8 or 2), seq_len = o["seq-len"] or (gpu and 512 or 64),
  dtype = o.dtype or (gpu and "bf16" or "f32"), iters = o.iters or 5, warmup = o.warmup or 2,
}
if not gpu then
  print("no GPU: profiling a small configuration on the CPU (op wall times; no kernels)")
end

-- ---- the model and one training step ----

engine.manual_seed(0)
local model = engine.models.ladder_lm {layer = "e88", dim = cfg.dim, depth = cfg.depth,
                                       n_heads = cfg.heads, n_state = cfg.n_state,
                                       dtype = cfg.dtype, device = device}
local n_params = model:num_parameters()
print(("E88 ladder LM: dim %d, depth %d, %d heads, n_state %d, %s on %s: %d parameters (%.1fM)")
  :format(cfg.dim, cfg.depth, cfg.heads, cfg.n_state, cfg.dtype, device, n_params, n_params / 1e6))
print(("batch %d x %d tokens; %d warmup steps, %d profiled steps%s"):format(cfg.batch, cfg.seq_len,
  cfg.warmup, cfg.iters, o.optimizer and " (with the AdamW step)" or " (forward + backward)"))

local tokens = engine.randint(0, 256, {cfg.batch, cfg.seq_len + 1}, {dtype = "i64", device = device})
local inputs, targets = tokens:narrow(1, 0, cfg.seq_len), tokens:narrow(1, 1, cfg.seq_len)
local opt = o.optimizer and engine.optim.AdamW(model:parameters(), {lr = 6.4e-4, betas = {0.9, 0.95},
                                                                    weight_decay = 0.01})

local function step(p)
  p:phase("forward")
  local loss = model:loss(inputs, targets)
  loss:backward() -- autograd's backward pass is phase "backward" by itself
  if opt then
    p:phase("optimizer")
    opt:step()
    opt:zero_grad()
  else
    model:zero_grad()
  end
end

local function sync() if gpu then engine.cuda.synchronize() end end
local no_phases = {phase = function() end}

-- Wall time of fn, from a synchronized device and a collected Lua heap (so each measurement pays
-- for its own garbage only).
local function timed(fn)
  collectgarbage()
  sync()
  local t = engine.clock()
  fn()
  sync()
  return engine.clock() - t
end
local function plain_steps() for _ = 1, cfg.iters do step(no_phases) end end

-- The profiler's overhead on a real step: the same steps without it, before and after the
-- profiled ones (the faster of the two, so warm-up effects do not flatter the profiler).
for _ = 1, cfg.warmup do step(no_phases) end
local plain = timed(plain_steps)
local t0, inside = engine.clock(), nil
local prof = engine.profile(function(p)
  inside = timed(function() for _ = 1, cfg.iters do step(p) end end)
end, {warmup = 0, cuda = gpu})
local wall = engine.clock() - t0
local iters = cfg.iters
plain = math.min(plain, timed(plain_steps))

-- ---- the breakdown ----

local on_gpu = prof.has_gpu
-- GPU: kernel names; CPU: op names
local groups = on_gpu and {
  {"E88 backward", "e88.*backward|e88.*bwd"},
  {"E88 forward", "e88.*forward|e88.*fwd"},
  {"GEMM", "gemm|cublas|cutlass|xmma|sm90_|sm80_"},
} or {
  {"E88 backward", "^e88_backward$"},
  {"E88 forward", "^e88$"},
  {"GEMM", "^matmul$|^linear$"},
}
print()
print(prof:table {group = groups, title = ("%s time over %d steps, by component (%s)")
                    :format(on_gpu and "GPU kernel" or "CPU op", iters,
                            on_gpu and "kernel names" or "op names")})
local s = prof:summary {group = groups}
local g = {}
for _, r in ipairs(s.groups) do g[r.name] = r end
print(("per step: %.3f ms of %s time; wall %.3f ms profiled, %.3f ms without the profiler (overhead %+.1f%%)")
  :format(s.totals.total_ms / iters, on_gpu and "GPU" or "CPU", inside / iters * 1e3, plain / iters * 1e3,
          100 * (inside / plain - 1)))

local labels, values = {}, {}
for _, r in ipairs(s.groups) do
  labels[#labels + 1] = r.name
  values[#values + 1] = r.ms / iters
end
local plot_path = o.plot or "e88_profile_breakdown.svg"
plot.bar {title = ("E88 %.1fM, B=%d T=%d: %s time per step"):format(n_params / 1e6, cfg.batch,
                                                                   cfg.seq_len, on_gpu and "GPU" or "CPU"),
          labels = labels, values = values, unit = "ms", path = plot_path}

-- ---- E88 kernels (or ops) ----

local fwd, bwd = g["E88 forward"], g["E88 backward"]
print()
print("E88 " .. (on_gpu and "kernels" or "ops (CPU)") .. " per step:")
for _, r in ipairs {fwd, bwd} do
  print(("  %-13s %9.3f ms/step  %6.1f calls/step  %9.2f us/call  %5.1f%% of total")
    :format(r.name, r.ms / iters, r.calls / iters, r.us_per_call, r.pct))
end
if fwd.ms > 0 then print(("  backward / forward time: %.2f"):format(bwd.ms / fwd.ms)) end

-- ---- top kernels ----

print()
print(on_gpu and prof:kernels {top = o.top or 15} or prof:ops {top = o.top or 15})

-- ---- achieved rates ----

local function shapes(text) -- "bf16[8,512,1920], f32[1920]" -> {{dtype, dims}, ...}
  local out = {}
  for dt, dims in text:gmatch("(%w+)%[([%d,]*)%]") do
    local d = {}
    for v in dims:gmatch("%d+") do d[#d + 1] = tonumber(v) end
    out[#out + 1] = {dtype = dt, dims = d}
  end
  return out
end
local function numel(d)
  local n = 1
  for _, v in ipairs(d) do n = n * v end
  return n
end
local SIZE = {f64 = 8, f32 = 4, f16 = 2, bf16 = 2, i32 = 4, i64 = 8, u8 = 1}

-- FLOPs of a matmul/linear op from its input shapes (2 per multiply-add).
local function gemm_flops(op)
  local sh = shapes(op.inputs)
  if #sh < 2 then return 0 end
  local a, b = sh[1].dims, sh[2].dims
  if op.name == "linear" then -- x [..., K] @ W[N, K]^T
    return 2 * numel(a) * b[1]
  end
  if #a < 2 or #b < 2 then return 2 * numel(a) * (b[#b] or 1) end
  local M, K, N = a[#a - 1], a[#a], b[#b]
  local batch = math.max(numel(a) / (M * K), numel(b) / (K * N))
  return 2 * batch * M * N * K
end

-- Bytes an E88 op must move at least: its inputs, and outputs the size of (forward) its value
-- input plus the f32 ckpt the backward needs (the state every 16 steps, the mixer's default, and
-- delta and o of every step) or (backward) every gradient.
local function e88_bytes(op)
  local total, sh = 0, shapes(op.inputs)
  for _, t in ipairs(sh) do total = total + numel(t.dims) * SIZE[t.dtype] end
  if op.name == "e88" and sh[3] then
    local q, v = sh[1].dims, sh[3].dims -- [B, T, H, n], [B, T, H, v]
    local B, T, H, n, V = q[1], q[2], q[3], q[4], v[4]
    total = total + numel(v) * SIZE[sh[3].dtype] + B * H * (math.ceil(T / 16) * n * V + 2 * T * V) * 4
  else
    for i = 1, math.min(5, #sh) do total = total + numel(sh[i].dims) * SIZE[sh[i].dtype] end
  end
  return total
end

local flops, e88_fwd_bytes, e88_bwd_bytes = 0, 0, 0
local gemm_time = 0
for _, op in ipairs(prof.records.ops) do
  if op.name == "matmul" or op.name == "linear" then
    flops = flops + gemm_flops(op)
    gemm_time = gemm_time + (on_gpu and op.gpu or op.self)
  elseif op.name == "e88" then
    e88_fwd_bytes = e88_fwd_bytes + e88_bytes(op)
  elseif op.name == "e88_backward" then
    e88_bwd_bytes = e88_bwd_bytes + e88_bytes(op)
  end
end

print()
if on_gpu then
  local props = engine.cuda.properties()
  -- dense bf16 peaks from the data sheets; else SMs x clock x FLOP per SM per clock
  local known = props.name:find("H100") and props.name:find("PCIe") and 756
                or (props.name:find("H100") or props.name:find("H200")) and 989
                or props.name:find("A100") and 312
  local per_clock = props.major >= 9 and 4096 or 2048
  local peak = o["peak-tflops"] or known or props.sm_count * props.clock_khz * 1e3 * per_clock / 1e12
  local bw = (o["bandwidth-gbs"] or 2 * props.memory_clock_khz * 1e3 * props.memory_bus_bits / 8 / 1e9)
  if not (peak > 0 and bw > 0) then
    print("the device reports no clock rates: pass --peak-tflops and --bandwidth-gbs for the rates")
    peak, bw = peak > 0 and peak or 0 / 0, bw > 0 and bw or 0 / 0
  end
  print(("%s: peak %.0f TFLOP/s dense bf16%s, %.0f GB/s%s"):format(props.name, peak,
    o["peak-tflops"] and "" or known and " (data sheet)" or " (SMs x clock)", bw, o["bandwidth-gbs"] and "" or " (memory clock x bus)"))
  if gemm_time > 0 then
    local rate = flops / (gemm_time / 1e9) / 1e12
    print(("GEMMs (matmul/linear ops): %.1f GFLOP per step in %.3f ms: %.1f TFLOP/s, %.0f%% of peak")
      :format(flops / iters / 1e9, gemm_time / iters / 1e6, rate, 100 * rate / peak))
  end
  for _, r in ipairs {{fwd, e88_fwd_bytes}, {bwd, e88_bwd_bytes}} do
    local floor_ms = r[2] / iters / (bw * 1e9) * 1e3
    if r[1].ms > 0 then
      print(("%s: %.3f ms per step against a memory floor of %.3f ms (%.1f MB at %.0f GB/s): %.1fx the floor")
        :format(r[1].name, r[1].ms / iters, floor_ms, r[2] / iters / 1e6, bw, r[1].ms / iters / floor_ms))
    end
  end
else
  if gemm_time > 0 then
    print(("GEMMs (matmul/linear ops, CPU): %.2f GFLOP per step in %.3f ms: %.1f GFLOP/s")
      :format(flops / iters / 1e9, gemm_time / iters / 1e6, flops / (gemm_time / 1e9) / 1e9))
  end
end

print()
print(prof:memory())

local trace = o.trace or "e88_profile_trace.json"
prof:save_trace(trace)
print()
print(("wrote %s (open in ui.perfetto.dev) and %s; the profile took %.1f s"):format(trace, plot_path, wall))
