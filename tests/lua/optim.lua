-- engine.optim: AdamW, schedule-free AdamW and SGD steps against plain-Lua arithmetic, parameter
-- groups, gradient clipping, schedules, and optimizer state round trips.
local t = require "spec"
local engine = require "engine"
local optim, nn = engine.optim, engine.nn

-- A leaf parameter and its values (flat Lua array).
local function param(n, seed, dtype)
  local vals = t.random_values(n, seed, -1, 1)
  return engine.tensor(vals, {dtype = dtype or "f32"}):requires_grad(true), vals
end

-- Gradients for step k of parameter i: fixed pseudo-random values.
local function grads_for(n, k, i) return t.random_values(n, 1000 * k + i, -2, 2) end

local function set_grads(params, k)
  for i, p in ipairs(params) do
    p:set_grad(engine.tensor(grads_for(p:numel(), k, i), {dtype = p:dtype()}))
  end
end

t.case("AdamW: three steps against the plain arithmetic, decay per group", function()
  local p1, v1 = param(6, 1)
  local p2, v2 = param(4, 2)
  local lr, b1, b2, eps = 0.01, 0.9, 0.95, 1e-8
  local opt = optim.AdamW({{params = {p1}, weight_decay = 0.1}, {params = {p2}, weight_decay = 0}},
                          {lr = lr, betas = {b1, b2}, eps = eps})
  local ref = {{vals = v1, wd = 0.1, m = {}, v = {}}, {vals = v2, wd = 0, m = {}, v = {}}}
  for k = 1, 3 do
    set_grads({p1, p2}, k)
    opt:step()
    for i, r in ipairs(ref) do
      local g = grads_for(#r.vals, k, i)
      for j = 1, #r.vals do
        r.m[j] = b1 * (r.m[j] or 0) + (1 - b1) * g[j]
        r.v[j] = b2 * (r.v[j] or 0) + (1 - b2) * g[j] ^ 2
        local mh, vh = r.m[j] / (1 - b1 ^ k), r.v[j] / (1 - b2 ^ k)
        r.vals[j] = r.vals[j] * (1 - lr * r.wd) - lr * mh / (math.sqrt(vh) + eps)
      end
    end
  end
  t.near(p1:tolist(), ref[1].vals, 1e-5)
  t.near(p2:tolist(), ref[2].vals, 1e-5)
  t.eq(opt.state[1].exp_avg:dtype(), "f32")
  -- a parameter without a gradient is left alone
  local before = p2:tolist()
  p1:set_grad(engine.ones(6))
  p2:set_grad(nil)
  opt:step()
  t.eq(p2:tolist(), before)
end)

t.case("AdamW over bf16 parameters keeps f32 moments", function()
  local p = engine.tensor(t.random_values(8, 3, -1, 1), {dtype = "bf16"}):requires_grad(true)
  local q = p:float():detach():requires_grad(true)
  local a = optim.AdamW({p}, {lr = 0.01, weight_decay = 0})
  local b = optim.AdamW({q}, {lr = 0.01, weight_decay = 0})
  for k = 1, 2 do
    local g = grads_for(8, k, 1)
    p:set_grad(engine.tensor(g, {dtype = "bf16"}))
    q:set_grad(engine.tensor(g, {dtype = "bf16"}):float())
    a:step()
    b:step()
  end
  t.eq(a.state[1].exp_avg_sq:dtype(), "f32")
  t.eq(p:dtype(), "bf16")
  t.near(p:float():tolist(), q:tolist(), 1e-2)
end)

t.case("SGD with momentum (and nesterov) against the plain arithmetic", function()
  for _, nesterov in ipairs({false, true}) do
    local p, vals = param(5, 4)
    local lr, mom, wd = 0.1, 0.9, 0.01
    local opt = optim.SGD({p}, {lr = lr, momentum = mom, weight_decay = wd, nesterov = nesterov})
    local buf = {}
    for k = 1, 3 do
      set_grads({p}, k)
      opt:step()
      local g = grads_for(5, k, 1)
      for j = 1, 5 do
        local d = g[j] + wd * vals[j]
        buf[j] = mom * (buf[j] or 0) + d
        vals[j] = vals[j] - lr * (nesterov and d + mom * buf[j] or buf[j])
      end
    end
    t.near(p:tolist(), vals, 1e-5, nesterov and "nesterov" or "plain")
  end
end)

t.case("schedule-free AdamW against the reference arithmetic; eval/train swap", function()
  local p, y = param(5, 5)
  local lr, b1, b2, eps, wd, warmup = 0.05, 0.9, 0.99, 1e-8, 0.1, 2
  local opt = optim.ScheduleFreeAdamW({p}, {lr = lr, betas = {b1, b2}, eps = eps, weight_decay = wd,
                                            warmup = warmup})
  local z, v = {}, {}
  for j = 1, 5 do z[j], v[j] = y[j], 0 end
  local lr_max, wsum = 0, 0
  for k = 0, 3 do
    set_grads({p}, k + 1)
    opt:step()
    local g = grads_for(5, k + 1, 1)
    local lrk = lr * math.min(1, (k + 1) / warmup)
    lr_max = math.max(lr_max, lrk)
    wsum = wsum + lr_max ^ 2
    local c = lr_max ^ 2 / wsum
    for j = 1, 5 do
      v[j] = b2 * v[j] + (1 - b2) * g[j] ^ 2
      local u = g[j] / (math.sqrt(v[j] / (1 - b2 ^ (k + 1))) + eps) + wd * y[j]
      y[j] = (1 - c) * y[j] + c * z[j] + lrk * (b1 * (1 - c) - 1) * u
      z[j] = z[j] - lrk * u
    end
  end
  t.near(p:tolist(), y, 1e-5, "y")
  opt:eval()
  local x = {}
  for j = 1, 5 do x[j] = y[j] + (1 - 1 / b1) * (z[j] - y[j]) end
  t.near(p:tolist(), x, 1e-5, "x in eval mode")
  t.raises(function() opt:step() end, "opt:train() first")
  opt:train()
  t.near(p:tolist(), y, 1e-5, "y back in train mode")
end)

t.case("param_groups: no decay on norms, biases, 1-D and named decay parameters", function()
  local M = nn.Module:extend("M")
  function M:init()
    self:add_module("lin", nn.Linear(3, 4))
    self:add_module("norm", nn.RMSNorm(4))
    self:add_parameter("A_log", nn.parameter({4, 2}, {fill = 0}))
    self:add_parameter("mix", nn.parameter({4, 2}, {fill = 0}), {no_decay = true})
    self:add_parameter("W", nn.parameter({2, 2}, {fill = 0}))
  end
  local m = M()
  local groups = optim.param_groups(m, {weight_decay = 0.1})
  t.eq(#groups, 2)
  t.eq(groups[1].weight_decay, 0.1)
  t.eq(groups[2].weight_decay, 0)
  local function has(list, x)
    for _, p in ipairs(list) do if rawequal(p, x) then return true end end
    return false
  end
  t.eq(#groups[1].params, 2)
  t.truthy(has(groups[1].params, m.lin.weight) and has(groups[1].params, m.W), "decayed: 2-D weights")
  t.eq(#groups[2].params, 4)
  for _, p in ipairs({m.lin.bias, m.norm.weight, m.A_log, m.mix}) do
    t.truthy(has(groups[2].params, p), "not decayed")
  end
  -- a model given to an optimizer gets these groups
  local opt = optim.AdamW(m, {lr = 1, weight_decay = 0.5})
  t.eq({#opt.groups, opt.groups[1].weight_decay, opt.groups[2].weight_decay}, {2, 0.5, 0})
  t.raises(function() optim.AdamW(m, {learning_rate = 1}) end, "unknown option 'learning_rate'")
  t.raises(function() optim.SGD({}) end, "argument 1")
end)

t.case("clip_grad_norm scales all gradients to the global norm bound", function()
  local a, b = param(3, 6), param(2, 7)
  a:set_grad(engine.tensor{3, 0, 4})
  b:set_grad(engine.tensor{0, 12})
  local norm = optim.clip_grad_norm({a, b}, 6.5)
  t.near(norm:item(), 13, 1e-6)
  t.eq(norm:dtype(), "f32")
  t.near(a:grad():tolist(), {1.5, 0, 2}, 1e-5)
  t.near(b:grad():tolist(), {0, 6}, 1e-5)
  local n2 = optim.clip_grad_norm({a, b}, 100)
  t.near(n2:item(), 6.5, 1e-5)
  t.near(b:grad():tolist(), {0, 6}, 1e-5, "under the bound: unchanged")
end)

t.case("schedules: constant and warmup + cosine", function()
  local c = optim.schedule.constant()
  t.eq({c(1), c(1000)}, {1, 1})
  local cw = optim.schedule.constant{warmup = 4}
  t.eq({cw(1), cw(2), cw(4), cw(9)}, {0.25, 0.5, 1, 1})
  local s = optim.schedule.warmup_cosine{warmup = 10, total = 110, min_ratio = 0.1}
  t.near({s(0), s(5), s(10), s(60), s(110), s(200)}, {0, 0.5, 1, 0.55, 0.1, 0.1}, 1e-12)
  t.near(s(35), 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.25)), 1e-12)
  local byp = optim.schedule.warmup_cosine{min_ratio = 0}
  t.near({byp(1, 0), byp(1, 0.5), byp(1, 1)}, {1, 0.5, 0}, 1e-12)
end)

t.case("optimizer state round trip: a restored optimizer takes the same next step", function()
  for _, kind in ipairs({"AdamW", "ScheduleFreeAdamW", "SGD"}) do
    local p = param(6, 8)
    local opt = optim[kind]({p}, {lr = 0.01})
    for k = 1, 2 do set_grads({p}, k); opt:step() end
    local tensors, meta = opt:state_dict()
    local path = os.tmpname()
    engine.save(path, tensors, meta)
    local lt, lm = engine.load(path)
    os.remove(path)
    local q = p:detach():clone():requires_grad(true)
    local opt2 = optim[kind]({q}, {lr = 0.01})
    opt2:load_state_dict(lt, lm)
    set_grads({p}, 3); opt:step()
    set_grads({q}, 3); opt2:step()
    t.eq(q:tolist(), p:tolist(), kind)
  end
  local p = param(2, 9)
  local tensors, meta = optim.SGD({p}):state_dict()
  t.raises(function() optim.AdamW({p}):load_state_dict(tensors, meta) end, "SGD optimizer")
  local adam = optim.AdamW({p})
  local at, am = adam:state_dict()
  at["1.exp_avg"] = nil
  t.raises(function() optim.AdamW({p}):load_state_dict(at, am) end, "missing '1.exp_avg'")
  at["1.exp_avg"] = engine.zeros(3)
  t.raises(function() optim.AdamW({p}):load_state_dict(at, am) end,
           "'1.exp_avg' has shape [3], the parameter [2]")
end)

t.case("set_lr_scale drives every group's lr from its initial lr", function()
  local opt = optim.SGD({{params = {(param(2, 10))}, lr = 0.5}, {params = {(param(2, 11))}}}, {lr = 0.1})
  opt:set_lr_scale(0.5)
  t.eq({opt.groups[1].lr, opt.groups[2].lr}, {0.25, 0.05})
  t.eq(opt:lr(), 0.25)
end)
