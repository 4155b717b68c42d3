-- Trains a byte-level ladder language model on any file:
--   engine run scripts/train_lm.lua --data FILE --layer mlp --params 50M --steps 1000
-- `--help` lists the flags. Checkpoints go to --out (resume with --resume).
local engine = require "engine"

local USAGE = [[
usage: engine run scripts/train_lm.lua --data FILE [options]

model (either --params, or --dim and --depth):
  --layer NAME       mixer: mlp, attention, or any registered one (default mlp)
  --params N         parameter target, e.g. 50M, 1.3B: dim/expansion from the ladder table,
                     depth from probes (engine.models.create_ladder_model)
  --dim N --depth N  explicit size; --expansion X (default 1.5), --heads N (attention)
training:
  --steps N | --minutes M   length of the run (default --steps 1000)
  --batch N          sequences per step (default 16)
  --seq-len N        bytes per sequence (default 512)
  --lr X             peak learning rate (default 1e-3)
  --warmup N         warmup steps (default min(100, steps/10))
  --optimizer NAME   adamw (default), schedule_free or sgd
  --schedule NAME    cosine (default) or constant
  --weight-decay X   (default 0.01); --clip X (default 1.0, 0: off)
  --bf16             bf16 weights and activations (f32 optimizer state and residual stream)
  --seed N           seed of the initialisation and of the data windows (default 0)
  --device NAME      cpu or cuda (default: engine.device())
output:
  --out DIR          checkpoint directory (DIR/checkpoint.safetensors)
  --checkpoint-every N  steps between checkpoints (default: only at the end)
  --resume           continue from DIR's checkpoint (same flags as the first run)
  --log-every N      steps between progress lines (default 10)
  -h, --help         this text]]

local FLAGS = {
  data = "string", layer = "string", params = "string", dim = "int", depth = "int",
  expansion = "number", heads = "int", steps = "int", minutes = "number", batch = "int",
  ["seq-len"] = "int", lr = "number", warmup = "count", optimizer = "string", schedule = "string",
  ["weight-decay"] = "amount", clip = "amount", bf16 = "bool", seed = "count", device = "string",
  out = "string", ["checkpoint-every"] = "int", resume = "bool", ["log-every"] = "int",
}

local function fail(msg) engine.cli.fail("train_lm", msg) end

local o = engine.cli.parse("train_lm", FLAGS, arg or {...}, USAGE)
if not o then return end
if not o.data then fail("--data FILE is required") end
local f = io.open(o.data, "rb")
if not f then fail("cannot read --data '" .. o.data .. "'") end
f:close()
if o.steps and o.minutes then fail("give --steps or --minutes, not both") end
if o.params and (o.dim or o.depth) then fail("give --params or --dim/--depth, not both") end
if not o.params and not (o.dim and o.depth) then fail("give --params N or both --dim and --depth") end
if o.resume and not o.out then fail("--resume needs --out DIR") end

local device = o.device or engine.device()
local layer = o.layer or "mlp"
engine.manual_seed(o.seed or 0)
local mopts = {expansion = o.expansion, n_heads = o.heads, device = device}
local ok, model = pcall(function()
  if o.params then return (engine.models.create_ladder_model(layer, o.params, mopts)) end
  mopts.layer, mopts.dim, mopts.depth = layer, o.dim, o.depth
  local m = engine.models.ladder_lm(mopts)
  print(("ladder model: layer=%s dim=%d depth=%d -> %d parameters"):format(layer, o.dim, o.depth,
        m:num_parameters()))
  return m
end)
if not ok then fail((tostring(model):gsub("^[^:]*:%d+: ", ""))) end

local clip = o.clip
if clip == 0 then clip = false end
local steps = o.steps or (not o.minutes and 1000 or nil)
local summary = engine.train{
  model = model, data = o.data, batch = o.batch or 16, seq_len = o["seq-len"] or 512,
  seed = o.seed or 0, lr = o.lr or 1e-3, steps = steps, minutes = o.minutes,
  warmup = o.warmup, optimizer = o.optimizer, schedule = o.schedule,
  weight_decay = o["weight-decay"], clip = clip, bf16 = o.bf16, device = device, out = o.out,
  checkpoint_every = o["checkpoint-every"], resume = o.resume, log_every = o["log-every"],
}
return summary
