-- The E1 vs E23 study: how the two Elman cells (E1: gated, h only; E23: h plus a tape of n_slots
-- rows read and written by attention every step) compare as ladder mixers.
--   1. forward time per time step at B = 1, 4, 8, 16, 32 (batch scaling; plot e23_batch_scaling.svg)
--   2. one layer's forward/backward breakdown at B = 64, d = 768 (profiled; plot e23_breakdown.svg)
--   3. the memory each layer saves for its backward: hidden states, gate inputs, inputs, tape
--   4. training throughput (tokens/s) of E1 and E23 ladder models at 50M parameters
-- Without a GPU every size shrinks so that the study runs on the CPU in a minute or two.
--   engine run scripts/profile_e23.lua [--help]
local engine = require "engine"
local plot = engine.plot

local USAGE = [[
usage: engine run scripts/profile_e23.lua [options]

  --dim N             layer width (default 768; CPU 64)
  --seq-len N         time steps (default 512; CPU 32)
  --batches LIST      batch sizes of the scaling table (default 1,4,8,16,32)
  --batch N           batch of the breakdown and memory tables (default 64; CPU 8)
  --n-slots N         E23 tape rows (default 8)
  --dtype NAME        bf16 (default on GPU) or f32 (default on CPU)
  --reps N            timed repetitions, median taken (default 5; CPU 3)
  --params N          size of the trained models, e.g. 50M (default 50M; CPU 1M)
  --train-steps N     timed training steps (default 20; CPU 3), after 2 warmup steps
  --train-batch N --train-seq N   training batch (default 16 x 512; CPU 2 x 32)
  --train-dim N       width of the trained models (default: the ladder table's; CPU 128)
  --device NAME       cuda or cpu (default: engine.device())
  --prefix PATH       prefix of the plots (default e23_)
  -h, --help          this text]]

local FLAGS = {dim = "int", ["seq-len"] = "int", batches = "string", batch = "int",
               ["n-slots"] = "int", dtype = "string", reps = "int", params = "string",
               ["train-steps"] = "int", ["train-batch"] = "int", ["train-seq"] = "int", ["train-dim"] = "int",
               device = "string", prefix = "string"}

local function fail(msg) engine.cli.fail("profile_e23", msg) end

local o = engine.cli.parse("profile_e23", FLAGS, arg or {...}, USAGE)
if not o then return end

local device = o.device or engine.device()
local gpu = device:find("^cuda") ~= nil
local cfg = {
  dim = o.dim or (gpu and 768 or 64), T = o["seq-len"] or (gpu and 512 or 32),
  batch = o.batch or (gpu and 64 or 8), n_slots = o["n-slots"] or 8,
  dtype = o.dtype or (gpu and "bf16" or "f32"), reps = o.reps or (gpu and 5 or 3),
  params = o.params or (gpu and "50M" or "1M"), train_steps = o["train-steps"] or (gpu and 20 or 3),
  train_batch = o["train-batch"] or (gpu and 16 or 2), train_seq = o["train-seq"] or (gpu and 512 or 32),
  train_dim = o["train-dim"] or (not gpu and 128 or nil), prefix = o.prefix or "e23_",
}
local batches = {}
for b in (o.batches or "1,4,8,16,32"):gmatch("[^,]+") do
  local n = tonumber(b)
  if not n or n < 1 or n ~= math.floor(n) then fail("--batches needs positive integers, got '" .. b .. "'") end
  batches[#batches + 1] = n
end
if not gpu then print("no GPU: a scaled-down study on the CPU (op wall times; no kernels)") end
print(("E1 vs E23 (n_slots %d): d %d, T %d, %s on %s"):format(cfg.n_slots, cfg.dim, cfg.T, cfg.dtype, device))

local LAYERS = {"e1", "e23"}
local NAME = {e1 = "E1", e23 = "E23"}

local function sync() if gpu then engine.cuda.synchronize() end end

local function median(v)
  table.sort(v)
  return v[math.floor((#v + 1) / 2)]
end

local function layer(name)
  engine.manual_seed(0)
  return engine.models.mixer(name)(cfg.dim, {dtype = cfg.dtype, device = device, n_slots = cfg.n_slots})
end

local function input(B, grad)
  local x = engine.randn({B, cfg.T, cfg.dim}, {dtype = cfg.dtype, device = device})
  if grad then x:requires_grad(true) end
  return x
end

-- ---- 1. batch scaling of the forward ----

print()
print("1. forward time per time step (us), median of " .. cfg.reps)
local series = {}
local rows = {}
for li, name in ipairs(LAYERS) do
  local m = layer(name)
  series[li] = {name = NAME[name], y = {}}
  for bi, B in ipairs(batches) do
    local x = input(B)
    local times = {}
    engine.no_grad(function()
      m(x) -- warm up
      for r = 1, cfg.reps do
        sync()
        local t = engine.clock()
        m(x)
        sync()
        times[r] = engine.clock() - t
      end
    end)
    series[li].y[bi] = median(times) / cfg.T * 1e6
    rows[bi] = rows[bi] or {B}
    rows[bi][li + 1] = series[li].y[bi]
  end
end
print(("%6s %14s %14s %10s %16s %16s"):format("B", "E1 us/step", "E23 us/step", "E23/E1",
                                             "E1 tokens/s", "E23 tokens/s"))
for _, r in ipairs(rows) do
  print(("%6d %14.2f %14.2f %10.2f %16.0f %16.0f"):format(r[1], r[2], r[3], r[3] / r[2],
                                                          r[1] / r[2] * 1e6, r[1] / r[3] * 1e6))
end
plot.lines {title = ("forward time per step, d=%d T=%d %s"):format(cfg.dim, cfg.T, cfg.dtype),
            x = batches, series = series, xlabel = "batch", ylabel = "us per time step", logx = true,
            path = cfg.prefix .. "batch_scaling.svg"}

-- ---- 2. one layer's forward/backward breakdown ----

print()
print(("2. one layer, forward + backward at B=%d (%s time by op, %d steps)"):format(cfg.batch,
  gpu and "GPU" or "CPU", cfg.reps))
local bar_labels, bar_values = {}, {}
local profiles = {}
for _, name in ipairs(LAYERS) do
  local m = layer(name)
  local x = input(cfg.batch, true)
  local function step() m(x):float():sum():backward() end
  local prof = engine.profile(function() for _ = 1, cfg.reps do step() end end, {warmup = 1})
  profiles[name] = prof
  local groups = {
    {NAME[name] .. " backward", "^" .. name .. "_backward$"},
    {NAME[name] .. " forward", "^" .. name .. "$"},
    {"GEMM", "^linear$|^matmul$"},
  }
  print(prof:table {group = groups, by = "op", title = NAME[name] .. " layer"})
  for _, r in ipairs(prof:summary {group = groups, by = "op"}.groups) do
    bar_labels[#bar_labels + 1] = NAME[name] .. ": " .. r.name
    bar_values[#bar_values + 1] = r.ms / cfg.reps
  end
  print()
end
plot.bar {title = ("one layer fwd+bwd per step, B=%d d=%d T=%d"):format(cfg.batch, cfg.dim, cfg.T),
          labels = bar_labels, values = bar_values, unit = "ms", path = cfg.prefix .. "breakdown.svg"}

-- ---- 3. saved memory per layer ----

local SIZE = {f64 = 8, f32 = 4, f16 = 2, bf16 = 2, i32 = 4, i64 = 8, u8 = 1}
local function input_bytes(op) -- per input of the op record: bytes
  local out = {}
  for dt, dims in op.inputs:gmatch("(%w+)%[([%d,]*)%]") do
    local n = 1
    for v in dims:gmatch("%d+") do n = n * tonumber(v) end
    out[#out + 1] = n * SIZE[dt]
  end
  return out
end

-- What the backward op of the layer was handed (its record's inputs): e1_backward(z, W_h, h0,
-- hs, ...), e23_backward(xw, W_h, W_write, b, h0, hs, ckpt, ...). Absent optional inputs are "-".
local function backward_inputs(prof, name)
  for _, op in ipairs(prof.records.ops) do
    if op.name == name .. "_backward" then
      local list, k = {}, 0
      for part in (op.inputs .. ", "):gmatch("(.-), ") do
        k = k + 1
        list[k] = part == "-" and 0 or input_bytes({inputs = part})[1]
      end
      return list
    end
  end
end

print(("3. memory saved for the backward, per layer at B=%d (MiB)"):format(cfg.batch))
print(("%-6s %14s %14s %14s %14s %16s"):format("layer", "hidden states", "gate inputs", "inputs (xw)",
                                                "ckpt + trace", "measured total"))
for _, name in ipairs(LAYERS) do
  local m = layer(name)
  local x = input(cfg.batch, true)
  collectgarbage()
  local function live() local c, g = engine._profile_bytes_live(); return c + g end
  local y0 = engine.no_grad(function() return m(x) end)
  local base = live()
  y0 = nil
  local y1 = m(x) -- with the graph: what autograd keeps
  local with_graph = live()
  local _ = y1
  local b = backward_inputs(profiles[name], name) or {}
  local hidden, gate, xw, tape
  if name == "e1" then
    gate, hidden, xw, tape = b[1] or 0, b[4] or 0, 0, 0
  else
    xw, hidden, tape = b[1] or 0, b[6] or 0, b[7] or 0
    gate = hidden -- z [B,T,d], kept by the silu and the gate product outside the op
  end
  local MiB = 1048576
  print(("%-6s %14.2f %14.2f %14.2f %14.2f %16.2f"):format(NAME[name], hidden / MiB, gate / MiB,
                                                          xw / MiB, tape / MiB, (with_graph - base) / MiB))
  y1 = nil
  collectgarbage()
end
print("(components from the shapes the backward ops were handed; measured: live tensor bytes with")
print(" the graph minus without it, so projections' saved activations are included)")

-- ---- 4. training throughput at 50M parameters ----

print()
print(("4. training throughput: %s-parameter ladder models, B=%d T=%d, %d steps after 2 warmup")
  :format(cfg.params, cfg.train_batch, cfg.train_seq, cfg.train_steps))
local results = {}
for _, name in ipairs(LAYERS) do
  engine.manual_seed(0)
  local model, info = engine.models.create_ladder_model(name, cfg.params,
    {dtype = cfg.dtype, device = device, n_slots = cfg.n_slots, dim = cfg.train_dim})
  local opt = engine.optim.AdamW(model:parameters(), {lr = 1e-3, weight_decay = 0.01})
  local tokens = engine.randint(0, 256, {cfg.train_batch, cfg.train_seq + 1}, {dtype = "i64", device = device})
  local inp, tgt = tokens:narrow(1, 0, cfg.train_seq), tokens:narrow(1, 1, cfg.train_seq)
  local loss
  local function train_step()
    loss = model:loss(inp, tgt)
    loss:backward()
    opt:step()
    opt:zero_grad()
  end
  for _ = 1, 2 do train_step() end
  sync()
  local t = engine.clock()
  for _ = 1, cfg.train_steps do train_step() end
  sync()
  local dt = engine.clock() - t
  results[#results + 1] = {NAME[name], info.params, info.depth,
                           cfg.train_batch * cfg.train_seq * cfg.train_steps / dt,
                           dt / cfg.train_steps * 1e3, loss:item()}
end
print(("%-6s %12s %6s %14s %10s %18s"):format("layer", "params", "depth", "tokens/s", "ms/step",
                                             "loss (same batch)"))
for _, r in ipairs(results) do
  print(("%-6s %12d %6d %14.0f %10.2f %18.4f"):format(r[1], r[2], r[3], r[4], r[5], r[6]))
end
print(("E23 / E1 throughput: %.2f"):format(results[2][4] / results[1][4]))
print()
print(("plots: %sbatch_scaling.svg, %sbreakdown.svg"):format(cfg.prefix, cfg.prefix))
