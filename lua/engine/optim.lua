-- engine.optim: AdamW (one fused multi-tensor call per parameter group), schedule-free AdamW, SGD
-- with momentum, parameter groups, gradient clipping and learning-rate schedules.
--
-- Optimizer state is f32 whatever the parameters' dtype (f64 parameters keep f64 state); an
-- update of a bf16/f16 parameter is computed in f32 and rounded once into the parameter.
local engine = require "engine"
local F = engine.F
local doc = engine.doc

local optim = {}
doc(optim, [[engine.optim

AdamW, ScheduleFreeAdamW, SGD, param_groups(model[, opts]), clip_grad_norm(params, max_norm),
schedule.constant(), schedule.warmup_cosine{warmup =, total =, min_ratio =}.]])

-- ---- parameter groups ----

-- Names of parameters that get no weight decay even when 2-D or larger (recurrent decay
-- parameters of mixers). A mixer can also mark a parameter with add_parameter(.., {no_decay = true}).
optim.NO_DECAY_PATTERNS = {"A_log$", "dt_bias$", "%.bias$"}

local function is_module(x) return type(x) == "table" and x.named_parameters ~= nil end

function optim.param_groups(model, opts)
  opts = opts or {}
  local patterns = opts.no_decay_patterns or optim.NO_DECAY_PATTERNS
  local decay, no_decay = {}, {}
  for _, e in ipairs(model:named_parameters()) do
    local skip = e.no_decay or e.param:dim() < 2
    for _, pat in ipairs(patterns) do skip = skip or e.name:find(pat) ~= nil end
    local list = skip and no_decay or decay
    list[#list + 1] = e.param
  end
  local groups = {}
  if #decay > 0 then groups[#groups + 1] = {params = decay, weight_decay = opts.weight_decay} end
  if #no_decay > 0 then groups[#groups + 1] = {params = no_decay, weight_decay = 0} end
  return groups
end
doc(optim.param_groups, [[optim.param_groups(model[, {weight_decay =, no_decay_patterns =}]) -> groups

Two groups: parameters with weight decay, and those without: entries marked no_decay (norm
weights, biases: nn's layers mark them), every parameter with fewer than 2 dims, and names
matching a pattern of optim.NO_DECAY_PATTERNS ({"A_log$", "dt_bias$", "%.bias$"}). The
optimizers call this when given a model instead of a list of parameters.]])

-- ---- the common part of the optimizers ----

local Optimizer = {}
Optimizer.__index = Optimizer

local function is_float_tensor(p)
  local dt = p:dtype()
  return dt == "f32" or dt == "f64" or dt == "f16" or dt == "bf16"
end

-- params: a model, a list of tensors, or a list of groups {params = {...}, lr =, weight_decay = ...}.
local function new_optimizer(kind, params, opts, defaults)
  opts = opts or {}
  for k in pairs(opts) do
    if defaults[k] == nil then
      local names = {}
      for n in pairs(defaults) do names[#names + 1] = n end
      table.sort(names)
      error(("optim.%s: unknown option '%s' (options: %s)"):format(kind, tostring(k),
            table.concat(names, ", ")), 3)
    end
  end
  local hp = {}
  for k, v in pairs(defaults) do hp[k] = v end
  for k, v in pairs(opts) do hp[k] = v end
  if type(hp.lr) ~= "number" or hp.lr < 0 then
    error(("optim.%s: lr must be a non-negative number, got %s"):format(kind, tostring(hp.lr)), 3)
  end
  local groups
  if is_module(params) then
    groups = optim.param_groups(params, {weight_decay = hp.weight_decay})
  elseif type(params) == "table" and engine.is_tensor(params[1]) then
    groups = {{params = params}}
  elseif type(params) == "table" and type(params[1]) == "table" and params[1].params then
    groups = params
  else
    error("optim." .. kind .. ": argument 1 must be a model, a list of parameters or a list of groups", 3)
  end
  local self = setmetatable({kind = kind, groups = {}, hp = hp, state = {}, t = 0}, nil)
  local n = 0
  for gi, g in ipairs(groups) do
    local group = {}
    for k, v in pairs(hp) do group[k] = v end
    for k, v in pairs(g) do group[k] = v end
    group.initial_lr = group.lr
    for _, p in ipairs(group.params) do
      if not engine.is_tensor(p) or not is_float_tensor(p) then
        error(("optim.%s: group %d holds something that is not a floating-point tensor"):format(kind, gi), 3)
      end
      n = n + 1
    end
    self.groups[gi] = group
  end
  if n == 0 then error("optim." .. kind .. ": no parameters to optimize", 3) end
  return self
end

-- State tensors are f32 (f64 for f64 parameters), zero, on the parameter's device.
local function zeros_state(p)
  return engine.zeros(p:shape(), {dtype = p:dtype() == "f64" and "f64" or "f32", device = p:device()})
end

-- Runs fn(y) on an f32/f64 view of parameter p and writes the result back when p is bf16/f16.
local function update_in_wide(p, fn)
  local dt = p:dtype()
  if dt == "f32" or dt == "f64" then return fn(p) end
  local y = p:float()
  fn(y)
  p:copy_(y)
end

-- Every parameter with its flat index (state keys), group by group.
function Optimizer:each_param(fn)
  local i = 0
  for _, g in ipairs(self.groups) do
    for _, p in ipairs(g.params) do
      i = i + 1
      fn(i, p, g)
    end
  end
end

function Optimizer:zero_grad()
  self:each_param(function(_, p) p:set_grad(nil) end)
end

-- Sets every group's lr to its initial lr times mult (what schedules drive).
function Optimizer:set_lr_scale(mult)
  for _, g in ipairs(self.groups) do g.lr = g.initial_lr * mult end
end

function Optimizer:lr() return self.groups[1].lr end

-- The state as tensors {"<i>.<name>" = tensor} (i: flat parameter index) and metadata strings.
function Optimizer:state_dict()
  local tensors, meta = {}, {kind = self.kind, t = ("%d"):format(self.t)}
  for i, st in pairs(self.state) do
    for name, v in pairs(st) do
      if engine.is_tensor(v) then tensors[i .. "." .. name] = v end
    end
  end
  if self.extra_meta then self:extra_meta(meta) end
  return tensors, meta
end

function Optimizer:load_state_dict(tensors, meta)
  if meta.kind ~= self.kind then
    error(("load_state_dict: the state is of a %s optimizer, this is %s"):format(
      tostring(meta.kind), self.kind), 2)
  end
  local problems, state = {}, {}
  self:each_param(function(i, p)
    state[i] = {}
    for _, name in ipairs(self.state_names) do
      local t = tensors[i .. "." .. name]
      if not t then
        problems[#problems + 1] = "missing '" .. i .. "." .. name .. "'"
      elseif table.concat(t:shape(), ",") ~= table.concat(p:shape(), ",") then
        problems[#problems + 1] = ("'%d.%s' has shape [%s], the parameter [%s]"):format(
          i, name, table.concat(t:shape(), ","), table.concat(p:shape(), ","))
      else
        state[i][name] = zeros_state(p):copy_(t)
      end
    end
  end)
  if #problems > 0 then error("optimizer load_state_dict: " .. table.concat(problems, "; "), 2) end
  self.state = state
  self.t = tonumber(meta.t)
  if self.load_extra_meta then self:load_extra_meta(meta) end
  return self
end

-- ---- AdamW ----

local AdamW = setmetatable({}, {__index = Optimizer})
AdamW.__index = AdamW

function optim.AdamW(params, opts)
  local self = new_optimizer("AdamW", params, opts,
                             {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0.01})
  setmetatable(self, AdamW)
  self.state_names = {"exp_avg", "exp_avg_sq"}
  self:each_param(function(i, p)
    self.state[i] = {exp_avg = zeros_state(p), exp_avg_sq = zeros_state(p)}
  end)
  return self
end

-- One fused call per group over the parameters that have gradients.
function AdamW:step()
  self.t = self.t + 1
  engine.no_grad(function()
    local i = 0
    for _, g in ipairs(self.groups) do
      local ps, gs, ms, vs = {}, {}, {}, {}
      for _, p in ipairs(g.params) do
        i = i + 1
        local grad = p:grad()
        if grad then
          local n = #ps + 1
          ps[n], gs[n], ms[n], vs[n] = p, grad, self.state[i].exp_avg, self.state[i].exp_avg_sq
        end
      end
      if #ps > 0 then
        F.adamw_(ps, gs, ms, vs, {lr = g.lr, beta1 = g.betas[1], beta2 = g.betas[2], eps = g.eps,
                                  weight_decay = g.weight_decay or 0, step = self.t})
      end
    end
  end)
end
doc(optim.AdamW, [[optim.AdamW(params[, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0.01}]) -> opt

AdamW (decoupled weight decay, bias-corrected moments): p -= lr * (wd * p + m^ / (sqrt(v^) + eps)).
params: a model (then optim.param_groups: no decay on norms, biases, ...), a list of tensors, or
groups {params =, lr =, weight_decay = ...}. Moments are f32. One engine.F.adamw_ call (one kernel
on the GPU) per group. opt:step(), opt:zero_grad(), opt:set_lr_scale(mult), opt:lr(),
opt:state_dict() -> tensors, meta; opt:load_state_dict(tensors, meta).]])

-- ---- schedule-free AdamW (Defazio et al. 2024) ----

local SF = setmetatable({}, {__index = Optimizer})
SF.__index = SF

function optim.ScheduleFreeAdamW(params, opts)
  local self = new_optimizer("ScheduleFreeAdamW", params, opts,
                             {lr = 2.5e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0,
                              warmup = 0})
  setmetatable(self, SF)
  self.state_names = {"z", "exp_avg_sq"}
  self.mode = "train"
  engine.no_grad(function()
    self:each_param(function(i, p)
      self.state[i] = {z = zeros_state(p):copy_(p), exp_avg_sq = zeros_state(p)}
    end)
  end)
  return self
end

-- The parameters hold y (where gradients are taken) in train mode and x (the average that is
-- evaluated) in eval mode. Each group keeps lr_max and the sum of weights (weight_lr_power 2,
-- r 0, as in the reference implementation).
function SF:step()
  if self.mode ~= "train" then error("ScheduleFreeAdamW:step: call opt:train() first (eval mode)", 2) end
  local k = self.t
  self.t = k + 1
  engine.no_grad(function()
    local i = 0
    for _, g in ipairs(self.groups) do
      local beta1, beta2 = g.betas[1], g.betas[2]
      local lr = g.lr * (k < g.warmup and (k + 1) / g.warmup or 1)
      g.lr_max = math.max(g.lr_max or 0, lr)
      local weight = g.lr_max ^ 2
      g.weight_sum = (g.weight_sum or 0) + weight
      local ckp1 = g.weight_sum > 0 and weight / g.weight_sum or 0
      local y_lr = lr * (beta1 * (1 - ckp1) - 1)
      for _, p in ipairs(g.params) do
        i = i + 1
        local grad = p:grad()
        if grad then
          local st = self.state[i]
          local v, z = st.exp_avg_sq, st.z
          local gw = grad:to(v:dtype())
          v:mul_(beta2):addcmul_(gw, gw, 1 - beta2)
          local u = gw / ((v / (1 - beta2 ^ (k + 1))):sqrt() + g.eps)
          update_in_wide(p, function(y)
            if (g.weight_decay or 0) ~= 0 then u:add_(y, g.weight_decay) end
            y:lerp_(z, ckp1)
            y:add_(u, y_lr)
          end)
          z:sub_(u, lr)
        end
      end
    end
  end)
end

function SF:extra_meta(meta)
  for gi, g in ipairs(self.groups) do
    meta["lr_max." .. gi] = ("%.17g"):format(g.lr_max or 0)
    meta["weight_sum." .. gi] = ("%.17g"):format(g.weight_sum or 0)
  end
  meta.mode = self.mode
end

function SF:load_extra_meta(meta)
  for gi, g in ipairs(self.groups) do
    g.lr_max = tonumber(meta["lr_max." .. gi])
    g.weight_sum = tonumber(meta["weight_sum." .. gi])
  end
  self.mode = meta.mode
end

function SF:eval()
  if self.mode == "eval" then return end
  engine.no_grad(function()
    self:each_param(function(i, p, g)
      update_in_wide(p, function(y) y:lerp_(self.state[i].z, 1 - 1 / g.betas[1]) end)
    end)
  end)
  self.mode = "eval"
end

function SF:train()
  if self.mode == "train" then return end
  engine.no_grad(function()
    self:each_param(function(i, p, g)
      update_in_wide(p, function(x) x:lerp_(self.state[i].z, 1 - g.betas[1]) end)
    end)
  end)
  self.mode = "train"
end
doc(optim.ScheduleFreeAdamW, [[optim.ScheduleFreeAdamW(params[, {lr = 2.5e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, warmup = 0}]) -> opt

Schedule-free AdamW (Defazio et al. 2024, weight_lr_power 2): per step k (from 0), lr_k = lr *
min(1, (k+1)/warmup), c = lr_max^2 / sum of lr_max^2 so far; v = b2 v + (1-b2) g^2;
u = g / (sqrt(v / (1 - b2^(k+1))) + eps) + wd * y; y = (1-c) y + c z + lr_k (b1 (1-c) - 1) u;
z -= lr_k u. The parameters hold y; opt:eval() swaps in x = y + (1 - 1/b1)(z - y) for evaluation
and opt:train() swaps back. State z and v are f32.]])

-- ---- SGD with momentum ----

local SGD = setmetatable({}, {__index = Optimizer})
SGD.__index = SGD

function optim.SGD(params, opts)
  local self = new_optimizer("SGD", params, opts,
                             {lr = 1e-2, momentum = 0.9, weight_decay = 0, nesterov = false})
  setmetatable(self, SGD)
  self.state_names = {"momentum"}
  self:each_param(function(i, p) self.state[i] = {momentum = zeros_state(p)} end)
  return self
end

function SGD:step()
  self.t = self.t + 1
  engine.no_grad(function()
    self:each_param(function(i, p, g)
      local grad = p:grad()
      if not grad then return end
      local buf = self.state[i].momentum
      update_in_wide(p, function(w)
        local d = grad:to(buf:dtype())
        if (g.weight_decay or 0) ~= 0 then d = d + w * g.weight_decay end
        buf:mul_(g.momentum):add_(d)
        if g.nesterov then d = d + buf * g.momentum else d = buf end
        w:sub_(d, g.lr)
      end)
    end)
  end)
end
doc(optim.SGD, [[optim.SGD(params[, {lr = 1e-2, momentum = 0.9, weight_decay = 0, nesterov = false}]) -> opt

d = g + wd * p; buf = momentum * buf + d; p -= lr * buf (nesterov: p -= lr * (d + momentum *
buf)). The momentum buffer is f32.]])

-- ---- gradient clipping ----

function optim.clip_grad_norm(params, max_norm)
  if is_module(params) then params = params:parameters() end
  local grads = {}
  for _, p in ipairs(params) do
    local g = p:grad()
    if g then grads[#grads + 1] = g end
  end
  if #grads == 0 then return nil end
  return engine.no_grad(function()
    local norm = F.sum_squares(grads):sqrt()
    F.scale_(grads, (max_norm / (norm + 1e-6)):clamp(nil, 1))
    return norm
  end)
end
doc(optim.clip_grad_norm, [[optim.clip_grad_norm(params | model, max_norm) -> norm

Scales every gradient by min(1, max_norm / (norm + 1e-6)), norm being the global L2 norm of all
gradients (engine.F.sum_squares and engine.F.scale_: no host synchronisation). Returns the norm
before clipping as an f32 0-d tensor on the device (nil when no parameter has a gradient).]])

-- ---- schedules: functions (step[, progress]) -> lr multiplier ----

optim.schedule = {}
doc(optim.schedule, "engine.optim.schedule\n\nconstant(), warmup_cosine{warmup =, total =, min_ratio =}.")

function optim.schedule.constant(opts)
  local warmup = opts and opts.warmup or 0
  return function(step) return warmup > 0 and math.min(1, step / warmup) or 1 end
end
doc(optim.schedule.constant, [[optim.schedule.constant([{warmup = 0}]) -> fn(step)

1 (after a linear warmup from 0 over `warmup` steps, when given).]])

function optim.schedule.warmup_cosine(opts)
  opts = opts or {}
  local warmup, total, min_ratio = opts.warmup or 0, opts.total, opts.min_ratio or 0.1
  return function(step, progress)
    if step < warmup then return step / warmup end
    local frac
    if total then
      frac = total > warmup and (step - warmup) / (total - warmup) or 1
    else
      frac = progress or 0
    end
    frac = math.max(0, math.min(1, frac))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * frac))
  end
end
doc(optim.schedule.warmup_cosine, [[optim.schedule.warmup_cosine{warmup = 0, total =, min_ratio = 0.1} -> fn(step[, progress])

step / warmup for step < warmup, then min_ratio + (1 - min_ratio) (1 + cos(pi f)) / 2 with
f = (step - warmup) / (total - warmup) (clamped to [0, 1]). Without total, f is the progress
argument (engine.train passes the elapsed fraction of a time budget).]])

return optim
