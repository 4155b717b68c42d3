-- The main job: `scripts/run.sh` runs it. It builds a small byte-level network out of engine ops
-- (embedding -> rms_norm -> linear -> gelu -> linear -> cross-entropy), checks the loss of an
-- untrained network against its closed form, and times the forward pass.
-- On the GPU when one is present (a larger size), else on the CPU at a small size.
-- Flags: --batch N --seq N --dim N --iters N
local engine = require "engine"

local dev = engine.device()
local on_gpu = dev == "cuda"
local opts = on_gpu and {batch = 32, seq = 512, dim = 1024, iters = 20}
  or {batch = 8, seq = 128, dim = 256, iters = 5}
local i = 1
while arg and arg[i] do
  local key = arg[i]:match("^%-%-(%w+)$")
  if not key or opts[key] == nil or not tonumber(arg[i + 1]) then
    error(("main.lua: unknown or incomplete flag '%s' (flags: --batch --seq --dim --iters)"):format(arg[i]))
  end
  opts[key] = tonumber(arg[i + 1])
  i = i + 2
end

print(("engine %s on %s%s"):format(engine.version, dev,
  on_gpu and (" (" .. engine.cuda.properties().name .. ")") or ""))
local on = {device = dev}
local function sync() if on_gpu then engine.cuda.synchronize() end end
print(("byte-level MLP: batch %d, seq %d, dim %d, vocab 256"):format(opts.batch, opts.seq, opts.dim))

engine.manual_seed(1234)
local V, D = 256, opts.dim
local emb = engine.randn({V, D}, on) * 0.02
local W1 = engine.randn({4 * D, D}, on) * (1 / math.sqrt(D))
local W2 = engine.randn({V, 4 * D}, on) * 1e-3 -- nearly uniform logits: the loss must be close to log(256)
local tokens = engine.randint(0, V, {opts.batch, opts.seq + 1}, {dtype = "i64", device = dev})
local x_ids = tokens:narrow(1, 0, opts.seq)
local y_ids = tokens:narrow(1, 1, opts.seq)

local function forward()
  local h = engine.F.embedding(x_ids, emb)
  h = engine.F.rms_norm(h, nil, 1e-6)
  h = engine.F.linear(h, W1):gelu()
  local logits = engine.F.linear(h, W2)
  return engine.F.cross_entropy(logits, y_ids)
end

local loss = forward():item()
local expected = math.log(V)
print(("untrained loss %.4f nats/byte (uniform: log 256 = %.4f)"):format(loss, expected))
if math.abs(loss - expected) > 0.05 then
  error(("loss %.4f is not within 0.05 of log(256)"):format(loss))
end

forward()
sync()
local t0 = engine.clock()
for _ = 1, opts.iters do forward() end
sync()
local per_iter = (engine.clock() - t0) / opts.iters
local tokens_n = opts.batch * opts.seq
local flops = 2 * tokens_n * (D * 4 * D + 4 * D * V)
print(("forward: %.2f ms/iter, %.1f GFLOP/s in the two matmuls, %.0f tokens/s"):format(
  per_iter * 1e3, flops / per_iter / 1e9, tokens_n / per_iter))
