-- engine.nn: modules (trees of parameters with a forward function) and the usual layers.
--
-- A module keeps its parameters and submodules as fields (m.weight, m.blocks) and remembers the
-- order they were registered in, so parameters() and state_dict() are stable. Parameters are
-- leaf tensors with requires_grad set; a parameter entry may be marked no_decay (norm weights and
-- biases are), which engine.optim's default parameter groups read.
local engine = require "engine"
local F = engine.F
local doc = engine.doc

local nn = {}
doc(nn, [[engine.nn

Modules: Module (the base), Linear, Embedding, RMSNorm, LayerNorm, Dropout, Sequential, SwiGLU,
CausalConv1d. A module is called like a function (m(x) is m:forward(x)).]])

-- ---- parameter creation ----

-- Inside nn.without_init(fn) parameters are allocated but not initialised (engine.empty): for
-- probe models that are only counted.
local skip_init = false

local function finish_without_init(saved, ok, ...)
  skip_init = saved
  if not ok then error((...), 0) end
  return ...
end

function nn.without_init(fn, ...)
  local saved = skip_init
  skip_init = true
  return finish_without_init(saved, pcall(fn, ...))
end
doc(nn.without_init, [[nn.without_init(fn, ...) -> fn's results

Runs fn with parameter initialisation skipped (parameters are allocated with engine.empty): for
models built only to count their parameters.]])

local function tensor_opts(opts)
  return {dtype = opts and opts.dtype or "f32", device = opts and opts.device or "cpu"}
end

-- A new leaf parameter: normal(0, std), or filled with `fill` when std is nil.
local function new_param(shape, init, opts)
  local o = tensor_opts(opts)
  local t
  if skip_init then
    t = engine.empty(shape, o)
  elseif init.std then -- drawn and scaled in f32 (f64 for f64), rounded once to the dtype
    local wide = o.dtype == "f64" and "f64" or "f32"
    t = (engine.randn(shape, {dtype = wide, device = o.device}) * init.std):to(o.dtype)
  else
    t = engine.full(shape, init.fill, o)
  end
  return t:requires_grad(true)
end
nn.parameter = doc(new_param, [[nn.parameter(shape, {std = s} | {fill = v}[, {dtype=, device=}])

A new leaf tensor with requires_grad set: normal(0, s) from the engine's generator, or filled with v
(uninitialised inside nn.without_init).]])

-- ---- Module ----

local Module = {}
Module.__index = Module
nn.Module = Module

-- nn.Module:extend("Name") -> a class whose instances are made with Class(...) (calling init).
function Module:extend(name)
  local cls = setmetatable({}, {__index = self, __call = function(c, ...)
    local m = setmetatable({_params = {}, _children = {}, training = true}, c)
    m:init(...)
    return m
  end})
  cls.__index = cls
  cls.__name = name
  cls.__call = function(m, ...) return m:forward(...) end
  cls.__tostring = Module.__tostring
  return cls
end

function Module:init() end

function Module:forward()
  error((self.__name or "Module") .. ": forward is not defined", 2)
end

-- Registers (or replaces) parameter `name`; opts.no_decay marks it for the optimizer groups.
function Module:add_parameter(name, t, opts)
  if not engine.is_tensor(t) then
    error(("%s:add_parameter('%s'): expected a tensor, got %s"):format(self.__name, name, type(t)), 2)
  end
  if self[name] == nil or not self._params[name] then
    self._params[#self._params + 1] = name
  end
  self._params[name] = {no_decay = opts and opts.no_decay or false}
  self[name] = t
  return t
end

function Module:add_module(name, m)
  if getmetatable(m) == nil or m._params == nil then
    error(("%s:add_module('%s'): expected a module, got %s"):format(self.__name, name, type(m)), 2)
  end
  if not self._children[name] then self._children[#self._children + 1] = name end
  self._children[name] = true
  self[name] = m
  return m
end

-- Visits (prefix .. name, module) depth-first, parameters of a module before its children's.
local function walk(m, prefix, fn)
  fn(prefix, m)
  for _, name in ipairs(m._children) do walk(m[name], prefix .. name .. ".", fn) end
end

-- Entries {name = "blocks.1.norm.weight", param = tensor, no_decay = bool, module = m, key = "weight"}.
function Module:named_parameters()
  local out = {}
  walk(self, "", function(prefix, m)
    for _, key in ipairs(m._params) do
      out[#out + 1] = {name = prefix .. key, param = m[key], no_decay = m._params[key].no_decay,
                       module = m, key = key}
    end
  end)
  return out
end

function Module:parameters()
  local out = {}
  for i, e in ipairs(self:named_parameters()) do out[i] = e.param end
  return out
end

function Module:children()
  local out = {}
  for i, name in ipairs(self._children) do out[i] = self[name] end
  return out
end

function Module:num_parameters()
  local n = 0
  for _, p in ipairs(self:parameters()) do n = n + p:numel() end
  return n
end

function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do p:set_grad(nil) end
  return self
end

function Module:train(mode)
  if mode == nil then mode = true end
  walk(self, "", function(_, m) m.training = mode end)
  return self
end

function Module:eval() return self:train(false) end

-- Moves/converts the parameters not already on that device and dtype: the module keeps new leaf
-- tensors (optimizers made before hold the old ones). Parameters are floating point.
function Module:to(device, dtype)
  if dtype and not (dtype == "f64" or dtype == "f32" or dtype == "f16" or dtype == "bf16") then
    error("Module:to: dtype must be f64, f32, f16 or bf16, got " .. tostring(dtype), 2)
  end
  if device then device = engine.empty({0}, {device = device}):device() end -- "cuda" -> "cuda:0"
  for _, e in ipairs(self:named_parameters()) do
    local p = e.param
    if (device and p:device() ~= device) or (dtype and p:dtype() ~= dtype) then
      p = p:detach()
      if device then p = p:to(device) end
      if dtype then p = p:to(dtype) end
      e.module[e.key] = p:contiguous():requires_grad(true)
    end
  end
  return self
end

function Module:dtype()
  local p = self:parameters()[1]
  return p and p:dtype()
end

function Module:device()
  local p = self:parameters()[1]
  return p and p:device()
end

function Module:state_dict()
  local sd = {}
  for _, e in ipairs(self:named_parameters()) do sd[e.name] = e.param end
  return sd
end

local function shape_str(s) return "[" .. table.concat(s, ",") .. "]" end

-- Copies sd's tensors into the parameters. Every parameter must be there with its shape and
-- dtype, and nothing else may be (unless opts.strict == false, which allows missing and extra
-- keys but still checks shapes and dtypes).
function Module:load_state_dict(sd, opts)
  local strict = not (opts and opts.strict == false)
  local entries, problems, known = self:named_parameters(), {}, {}
  for _, e in ipairs(entries) do
    known[e.name] = true
    local t = sd[e.name]
    if t == nil then
      if strict then problems[#problems + 1] = "missing '" .. e.name .. "'" end
    elseif not engine.is_tensor(t) then
      problems[#problems + 1] = ("'%s' is a %s, not a tensor"):format(e.name, type(t))
    else
      local ps, ts = e.param:shape(), t:shape()
      if shape_str(ps) ~= shape_str(ts) then
        problems[#problems + 1] = ("'%s' has shape %s, the model wants %s"):format(
          e.name, shape_str(ts), shape_str(ps))
      elseif t:dtype() ~= e.param:dtype() then
        problems[#problems + 1] = ("'%s' has dtype %s, the model wants %s"):format(
          e.name, t:dtype(), e.param:dtype())
      end
    end
  end
  if strict then
    local extra = {}
    for name in pairs(sd) do if not known[name] then extra[#extra + 1] = name end end
    table.sort(extra)
    for _, name in ipairs(extra) do problems[#problems + 1] = "unexpected '" .. name .. "'" end
  end
  if #problems > 0 then
    error("load_state_dict: " .. table.concat(problems, "; "), 2)
  end
  engine.no_grad(function()
    for _, e in ipairs(entries) do
      if sd[e.name] then e.param:copy_(sd[e.name]) end
    end
  end)
  return self
end

function Module:save(path, metadata)
  engine.save(path, self:state_dict(), metadata)
end

function Module:load(path, opts)
  local tensors, meta = engine.load(path)
  self:load_state_dict(tensors, opts)
  return meta
end

function Module:extra_repr() return "" end

function Module:__tostring()
  local lines = {}
  local function render(m, indent, label)
    local head = indent .. (label and "(" .. label .. "): " or "") .. (m.__name or "Module") ..
                 "(" .. m:extra_repr()
    if #m._children == 0 then
      lines[#lines + 1] = head .. ")"
      return
    end
    lines[#lines + 1] = head .. (m:extra_repr() ~= "" and ", " or "") .. ("%d params"):format(
      m:num_parameters()) .. ") {"
    for _, name in ipairs(m._children) do render(m[name], indent .. "  ", name) end
    lines[#lines + 1] = indent .. "}"
  end
  render(self, "", nil)
  return table.concat(lines, "\n")
end

doc(Module, [[engine.nn.Module

The base of modules. Class = nn.Module:extend("Name"); define Class:init(...) (call
self:add_parameter(name, t[, {no_decay = true}]) and self:add_module(name, m)) and
Class:forward(...). Instances: m(x) (= m:forward(x)), m:parameters() (stable order: a module's
own, then its children's, depth-first), m:named_parameters() (entries {name = "a.b.weight",
param =, no_decay =, module =, key =}), m:children(), m:num_parameters(), m:zero_grad(),
m:train([mode]), m:eval(), m:to(device, dtype) (in place, new leaves), m:state_dict()
({name = tensor}), m:load_state_dict(sd[, {strict = true}]) (checks names, shapes and dtypes),
m:save(path[, meta]), m:load(path) -> meta, tostring(m) (the tree).]])

-- ---- layers ----

local Linear = Module:extend("Linear")
nn.Linear = Linear

-- Linear(in, out[, {bias = true, std = 0.02, dtype =, device =}]): y = x W^T + b.
function Linear:init(n_in, n_out, opts)
  opts = opts or {}
  self.n_in, self.n_out = n_in, n_out
  self:add_parameter("weight", new_param({n_out, n_in}, {std = opts.std or 0.02}, opts))
  if opts.bias ~= false then
    self:add_parameter("bias", new_param({n_out}, {fill = 0}, opts), {no_decay = true})
  end
end

function Linear:forward(x) return F.linear(x, self.weight, self.bias) end

function Linear:extra_repr()
  return ("%d -> %d%s"):format(self.n_in, self.n_out, self.bias and "" or ", no bias")
end
doc(Linear, [[nn.Linear(in, out[, {bias = true, std = 0.02, dtype =, device =}])

y = x W^T + b; W [out, in] ~ normal(0, std), b = 0 (no_decay).]])

local Embedding = Module:extend("Embedding")
nn.Embedding = Embedding

function Embedding:init(n, dim, opts)
  opts = opts or {}
  self.n, self.dim = n, dim
  self:add_parameter("weight", new_param({n, dim}, {std = opts.std or 0.02}, opts))
end

function Embedding:forward(ids) return F.embedding(ids, self.weight) end
function Embedding:extra_repr() return ("%d, %d"):format(self.n, self.dim) end
doc(Embedding, [[nn.Embedding(n, dim[, {std = 0.02, dtype =, device =}])

Rows of weight [n, dim] ~ normal(0, std), picked by integer ids (0-based).]])

local RMSNorm = Module:extend("RMSNorm")
nn.RMSNorm = RMSNorm

function RMSNorm:init(dim, opts)
  opts = opts or {}
  self.dim, self.eps = dim, opts.eps or 1e-6
  self:add_parameter("weight", new_param({dim}, {fill = 1}, opts), {no_decay = true})
end

function RMSNorm:forward(x) return F.rms_norm(x, self.weight, self.eps) end
function RMSNorm:extra_repr() return ("%d, eps=%g"):format(self.dim, self.eps) end
doc(RMSNorm, [[nn.RMSNorm(dim[, {eps = 1e-6, dtype =, device =}])

x / sqrt(mean(x^2) + eps) * weight over the last dim; weight = 1 (no_decay).]])

local LayerNorm = Module:extend("LayerNorm")
nn.LayerNorm = LayerNorm

function LayerNorm:init(dim, opts)
  opts = opts or {}
  self.dim, self.eps = dim, opts.eps or 1e-5
  self:add_parameter("weight", new_param({dim}, {fill = 1}, opts), {no_decay = true})
  if opts.bias ~= false then
    self:add_parameter("bias", new_param({dim}, {fill = 0}, opts), {no_decay = true})
  end
end

function LayerNorm:forward(x) return F.layer_norm(x, self.weight, self.bias, self.eps) end
function LayerNorm:extra_repr() return ("%d, eps=%g"):format(self.dim, self.eps) end
doc(LayerNorm, [[nn.LayerNorm(dim[, {eps = 1e-5, bias = true, dtype =, device =}])

Layer norm over the last dim; weight = 1, bias = 0 (both no_decay).]])

local Dropout = Module:extend("Dropout")
nn.Dropout = Dropout

function Dropout:init(p)
  p = p or 0.1
  if type(p) ~= "number" or p < 0 or p >= 1 then
    error("Dropout: p must be a number in [0, 1), got " .. tostring(p), 3)
  end
  self.p = p
end

-- Keeps each element with probability 1 - p (mask from engine.rand, the Philox generator) and
-- scales by 1 / (1 - p); the identity in eval mode.
function Dropout:forward(x)
  if not self.training or self.p == 0 then return x end
  local keep = engine.rand(x:shape(), {dtype = x:dtype(), device = x:device()}):ge(self.p)
  return x * keep * (1 / (1 - self.p))
end

function Dropout:extra_repr() return ("p=%g"):format(self.p) end
doc(Dropout, [[nn.Dropout([p = 0.1])

Zeroes elements with probability p (engine.rand, so engine.manual_seed fixes the mask) and scales
the rest by 1/(1-p) in training mode; the identity after m:eval().]])

local Sequential = Module:extend("Sequential")
nn.Sequential = Sequential

-- Sequential(m1, m2, ...) or Sequential{m1, m2, ...}: children named "1", "2", ...
function Sequential:init(...)
  local list = select("#", ...) == 1 and getmetatable((...)) == nil and (...) or {...}
  for i, m in ipairs(list) do self:add_module(tostring(i), m) end
end

function Sequential:forward(x)
  for _, name in ipairs(self._children) do x = self[name](x) end
  return x
end

doc(Sequential, [[nn.Sequential(m1, m2, ...)  |  nn.Sequential{m1, m2, ...}

Applies the modules in order; children are named "1", "2", ....]])

local SwiGLU = Module:extend("SwiGLU")
nn.SwiGLU = SwiGLU

-- SwiGLU(dim, hidden[, opts]): down(silu(gate(x)) * up(x)), no biases.
function SwiGLU:init(dim, hidden, opts)
  local o = {bias = false, std = opts and opts.std, dtype = opts and opts.dtype,
             device = opts and opts.device}
  self.dim, self.hidden = dim, hidden
  self:add_module("gate", Linear(dim, hidden, o))
  self:add_module("up", Linear(dim, hidden, o))
  self:add_module("down", Linear(hidden, dim, o))
end

function SwiGLU:forward(x)
  return self.down(self.gate(x):silu() * self.up(x))
end

function SwiGLU:extra_repr() return ("%d -> %d -> %d"):format(self.dim, self.hidden, self.dim) end
doc(SwiGLU, [[nn.SwiGLU(dim, hidden[, {std = 0.02, dtype =, device =}])

The gated MLP down(silu(gate(x)) * up(x)) with three bias-free Linear layers (3 dim hidden
parameters).]])

local CausalConv1d = Module:extend("CausalConv1d")
nn.CausalConv1d = CausalConv1d

-- Depthwise causal convolution over [B, T, D]: y[t, d] = b[d] + sum_k w[d, k] x[t - K + 1 + k, d],
-- with x = 0 before the start. Built from cat + narrow + mul + add, so autograd sees it whole.
function CausalConv1d:init(dim, opts)
  opts = opts or {}
  self.dim, self.kernel = dim, opts.kernel or 4
  if self.kernel < 1 then error("CausalConv1d: kernel must be >= 1, got " .. self.kernel, 3) end
  self:add_parameter("weight", new_param({dim, self.kernel},
                                         {std = opts.std or 1 / math.sqrt(self.kernel)}, opts))
  if opts.bias ~= false then
    self:add_parameter("bias", new_param({dim}, {fill = 0}, opts), {no_decay = true})
  end
end

function CausalConv1d:forward(x)
  local shape = x:shape()
  if #shape ~= 3 or shape[3] ~= self.dim then
    error(("CausalConv1d: expected x [B, T, %d], got [%s]"):format(self.dim,
          table.concat(shape, ",")), 2)
  end
  local B, T, K = shape[1], shape[2], self.kernel
  local padded = x
  if K > 1 then
    padded = engine.cat({engine.zeros({B, K - 1, self.dim}, {dtype = x:dtype(),
                                                             device = x:device()}), x}, 1)
  end
  local y
  for k = 0, K - 1 do
    local term = padded:narrow(1, k, T) * self.weight:select(1, k)
    y = y and y + term or term
  end
  if self.bias then y = y + self.bias end
  return y
end

function CausalConv1d:extra_repr()
  return ("%d, kernel=%d%s"):format(self.dim, self.kernel, self.bias and "" or ", no bias")
end
doc(CausalConv1d, [[nn.CausalConv1d(dim[, {kernel = 4, bias = true, std = 1/sqrt(kernel), dtype =, device =}])

The depthwise causal short convolution over x [B, T, dim]: y[t] = b + sum_k w[:, k] * x[t-K+1+k]
(zeros before the start); weight [dim, kernel].]])

return nn
