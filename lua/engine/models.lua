-- engine.models: the byte-level ladder language model and its mixer registry.
--
-- ladder_lm: embedding (vocab 256, std 0.02, tied to the output head) -> depth blocks of
-- [fused residual add + RMSNorm, mixer] -> final add + RMSNorm -> logits. The residual stream is
-- kept in f32 whatever the parameters' dtype (pre-norm, the "fused add norm" layout: block i
-- adds the previous block's output to the stream, then normalises it for its mixer).
local engine = require "engine"
local nn = engine.nn
local F = engine.F
local doc = engine.doc

local models = {}
doc(models, [[engine.models

ladder_lm{layer =, dim =, depth =, ...}, create_ladder_model(layer, params_target[, opts]),
register_mixer(name, constructor), mixer(name).]])

-- ---- mixers ----

local mixers = {}

function models.register_mixer(name, constructor)
  if type(name) ~= "string" then error("register_mixer: name must be a string", 2) end
  if type(constructor) ~= "function" and type(constructor) ~= "table" then
    error("register_mixer: constructor must be callable, got " .. type(constructor), 2)
  end
  mixers[name] = constructor
end
doc(models.register_mixer, [[models.register_mixer(name, constructor)

Makes `layer = name` available to ladder_lm. constructor(dim, opts) returns a module mapping
x [B, T, dim] to [B, T, dim]; opts is ladder_lm's options table (expansion, n_heads, dtype,
device, ... whatever the mixer reads). A file lua/engine/mixers/<name>.lua that returns such a
constructor is registered on first use without this call.]])

function models.mixer(name)
  if mixers[name] then return mixers[name] end
  local mod = "engine.mixers." .. tostring(name)
  if package.preload[mod] or package.loaded[mod] then
    mixers[name] = require(mod)
    return mixers[name]
  end
  local known = {}
  for k in pairs(mixers) do known[#known + 1] = k end
  for k in pairs(package.preload) do
    local m = k:match("^engine%.mixers%.([%w_]+)$")
    if m and not mixers[m] then known[#known + 1] = m end
  end
  table.sort(known)
  error(("ladder_lm: unknown layer '%s' (known: %s)"):format(tostring(name),
        table.concat(known, ", ")), 2)
end
doc(models.mixer, "models.mixer(name) -> constructor\n\nThe registered mixer constructor of name.")

-- ---- the fused residual add + RMSNorm ----

-- x in f32, or f64 when it is f64 (for gradient checks).
local function wide(x) return x:dtype() == "f64" and x or x:float() end

-- -> normed (x's dtype), residual (f32): residual = residual + x (x when residual is nil).
local function add_rms_norm(x, residual, w, eps)
  if F.add_rms_norm then return F.add_rms_norm(x, residual, w, eps) end
  local r = wide(x)
  if residual then r = residual + r end
  return F.rms_norm(r, wide(w), eps):to(x:dtype()), r
end

-- ---- ladder_lm ----

local Block = nn.Module:extend("Block")

function Block:init(dim, mixer, opts)
  self:add_module("norm", nn.RMSNorm(dim, opts))
  self:add_module("mixer", mixer(dim, opts))
end

-- (h, residual) -> (mixer output, new residual)
function Block:forward(h, residual)
  local normed
  normed, residual = add_rms_norm(h, residual, self.norm.weight, self.norm.eps)
  return self.mixer(normed), residual
end

local LadderLM = nn.Module:extend("LadderLM")
models.LadderLM = LadderLM

local VOCAB = 256

function LadderLM:init(opts)
  if type(opts) ~= "table" then error("ladder_lm: expected an options table {layer =, dim =, depth =}", 3) end
  for _, k in ipairs({"layer", "dim", "depth"}) do
    if opts[k] == nil then error("ladder_lm: option '" .. k .. "' is required", 3) end
  end
  if opts.dim < 1 or opts.depth < 1 then
    error(("ladder_lm: dim and depth must be positive, got %s and %s"):format(opts.dim, opts.depth), 3)
  end
  if opts.vocab and opts.vocab ~= VOCAB then
    error("ladder_lm: the ladder models are byte-level: vocab must be 256, got " .. opts.vocab, 3)
  end
  local mixer = models.mixer(opts.layer)
  self.layer, self.dim, self.depth = opts.layer, opts.dim, opts.depth
  self.opts = opts
  local popts = {dtype = opts.dtype, device = opts.device}
  self:add_module("embed", nn.Embedding(VOCAB, opts.dim, {std = 0.02, dtype = opts.dtype,
                                                         device = opts.device}))
  local blocks = self:add_module("blocks", nn.Sequential())
  for i = 1, opts.depth do blocks:add_module(tostring(i), Block(opts.dim, mixer, opts)) end
  self:add_module("norm", nn.RMSNorm(opts.dim, popts))
end

-- tokens [B, T] (integer) -> logits [B, T, 256] in the parameters' dtype.
function LadderLM:forward(tokens)
  local h, residual = self.embed(tokens), nil
  for _, name in ipairs(self.blocks._children) do
    h, residual = self.blocks[name](h, residual)
  end
  local normed = add_rms_norm(h, residual, self.norm.weight, self.norm.eps)
  return F.linear(normed, self.embed.weight) -- tied head
end

-- Mean cross-entropy in nats per byte (computed in f32).
function LadderLM:loss(tokens, targets)
  return F.cross_entropy(wide(self:forward(tokens)), targets)
end

function LadderLM:extra_repr()
  return ("layer=%s, dim=%d, depth=%d"):format(self.layer, self.dim, self.depth)
end

function models.ladder_lm(opts) return LadderLM(opts) end
doc(models.ladder_lm, [[models.ladder_lm{layer =, dim =, depth =[, expansion = 1.5][, n_heads =][, dtype =, device =]}

The byte-level ladder LM: embedding 256 x dim (std 0.02, tied to the output head), depth blocks
of (residual add + RMSNorm, mixer `layer`), a final add + RMSNorm and the logits. The residual
stream is f32. model(tokens) -> logits [B, T, 256]; model:loss(tokens, targets) -> mean
cross-entropy (nats per byte). Mixers: "mlp" (SwiGLU, hidden = round(expansion * dim)),
"attention" (causal softmax attention, n_heads = dim / 64 by default), and any registered one.]])

-- ---- create_ladder_model ----

local LADDER = {
  {50e6, 512, 1.5}, {100e6, 768, 1.5}, {200e6, 1024, 1.5}, {350e6, 1024, 2.0},
  {500e6, 1024, 2.5}, {700e6, 1280, 2.0}, {1e9, 1536, 2.0}, {1.3e9, 1792, 2.0},
}
models.LADDER = LADDER

-- "50M", "1.3B", "350k" or a number -> a number of parameters.
function models.parse_count(v)
  if type(v) == "number" then return v end
  local num, unit = tostring(v):match("^%s*([%d%.]+)%s*([kKmMbB]?)%s*$")
  num = tonumber(num)
  if not num then error("bad parameter count '" .. tostring(v) .. "' (e.g. 50M, 1.3B, 2e8)", 2) end
  local scale = ({[""] = 1, k = 1e3, K = 1e3, m = 1e6, M = 1e6, b = 1e9, B = 1e9})[unit]
  return num * scale
end

local function count_str(n)
  if n >= 1e9 then return ("%.2fB"):format(n / 1e9) end
  if n >= 1e6 then return ("%.1fM"):format(n / 1e6) end
  return ("%.1fk"):format(n / 1e3)
end

-- The ladder entry nearest to target, by ratio (|log(target / entry)|).
local function nearest_entry(target)
  local best, best_d
  for _, e in ipairs(LADDER) do
    local d = math.abs(math.log(target / e[1]))
    if not best_d or d < best_d then best, best_d = e, d end
  end
  return best
end

function models.create_ladder_model(layer, params_target, opts)
  local target = models.parse_count(params_target)
  if not (target > 0) then error("create_ladder_model: params_target must be positive", 2) end
  local entry = nearest_entry(target)
  local cfg = {}
  for k, v in pairs(opts or {}) do cfg[k] = v end
  cfg.layer, cfg.dim = layer, cfg.dim or entry[2]
  cfg.expansion = cfg.expansion or entry[3]
  -- probes: the same architecture at depth 1 and 2, parameters allocated but not initialised
  local function probe(depth)
    local p = {}
    for k, v in pairs(cfg) do p[k] = v end
    p.depth, p.device, p.dtype = depth, "cpu", "f32"
    return nn.without_init(function() return LadderLM(p):num_parameters() end)
  end
  local p1, p2 = probe(1), probe(2)
  local per_layer = p2 - p1
  local base = p1 - per_layer
  local depth = math.floor((target - base) / per_layer + 0.5)
  depth = math.max(4, math.min(48, depth))
  cfg.depth = depth
  local model = LadderLM(cfg)
  local n = model:num_parameters()
  if not (opts and opts.quiet) then
    print(("ladder model: layer=%s dim=%d expansion=%g depth=%d -> %d parameters (%s; target %s)")
      :format(layer, cfg.dim, cfg.expansion, depth, n, count_str(n), count_str(target)))
  end
  return model, {layer = layer, dim = cfg.dim, expansion = cfg.expansion, depth = depth,
                 params = n, base = base, per_layer = per_layer}
end
doc(models.create_ladder_model, [[models.create_ladder_model(layer, params_target[, opts]) -> model, config

dim and expansion from the ladder entry nearest to params_target (a number or "50M", "1.3B"):
50M 512/1.5, 100M 768/1.5, 200M 1024/1.5, 350M 1024/2.0, 500M 1024/2.5, 700M 1280/2.0,
1B 1536/2.0, 1.3B 1792/2.0 (opts.dim / opts.expansion override); depth = round((target - base) /
per_layer) from 1- and 2-layer probes of the same architecture, clamped to [4, 48]. Prints the
configuration and the exact parameter count (opts.quiet = true: silent). Other opts go to
ladder_lm (dtype, device, n_heads, ...). config: {layer, dim, expansion, depth, params, base,
per_layer}.]])

return models
