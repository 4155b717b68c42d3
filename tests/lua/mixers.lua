-- The E-series mixers of ladder_lm (e1, e23, e88): parameter counts against closed forms,
-- gradients through the recurrence ops against finite differences (the backward kernels as
-- autograd runs them), and a small ladder model of each that learns on the CPU.
local t = require "spec"
local engine = require "engine"
local models, nn = engine.models, engine.nn

local FIXTURE = debug.getinfo(1, "S").source:match("^@(.*)/lua/[^/]*$") .. "/data/design.txt"

t.case("parameter counts: closed forms", function()
  local D = 16
  local e1 = nn.without_init(function() return models.mixer("e1")(D, {expansion = 2}) end)
  local d = 2 * D
  t.eq(e1:num_parameters(), D * 2 * d + d * d + d * D + d * d + d)
  local e23 = nn.without_init(function() return models.mixer("e23")(D, {n_slots = 4}) end)
  t.eq(e23:num_parameters(), D * 2 * D + D * D + D * D + D * D + D + D * D)
  local H, n = 3, 4
  local e88 = nn.without_init(function() return models.mixer("e88")(D, {n_heads = H, n_state = n, expansion = 2}) end)
  local v = 2 * n
  t.eq(e88:num_parameters(), D * H * (2 * n + v) + D * H + D * H * v + H * v * D + 2 * H)
  local nogate = nn.without_init(function() return models.mixer("e88")(D, {n_heads = H, n_state = n, gate = false}) end)
  t.eq(nogate:num_parameters(), D * H * (2 * n + n) + D * H + H * n * D + 2 * H)
end)

-- f64 mixers on tiny sizes: every parameter's gradient against central differences.
local function gradcheck_mixer(name, opts)
  engine.manual_seed(3)
  opts.dtype = "f64"
  local m = models.mixer(name)(6, opts)
  local x = (engine.randn({2, 5, 6}, {dtype = "f64"}) * 0.5):detach()
  local params = m:parameters()
  return engine.gradcheck(function() return (m(x)) end, params, {atol = 1e-6, rtol = 1e-4})
end

t.case("e1 mixer gradients match finite differences", function() t.truthy(gradcheck_mixer("e1", {})) end)
t.case("e23 mixer gradients match finite differences", function()
  t.truthy(gradcheck_mixer("e23", {n_slots = 3}))
end)
t.case("e88 mixer gradients match finite differences", function()
  t.truthy(gradcheck_mixer("e88", {n_heads = 2, n_state = 4}))
end)
t.case("e88 without gate, without l2, linear state", function()
  t.truthy(gradcheck_mixer("e88", {n_heads = 2, n_state = 3, expansion = 2, gate = false, l2 = false,
                                   linear_state = true}))
end)

-- A short CPU run: the loss must fall well below its start.
local function trains(layer, opts)
  engine.manual_seed(5)
  opts.layer, opts.dim, opts.depth = layer, 24, 2
  local model = models.ladder_lm(opts)
  local res = engine.train{model = model, data = FIXTURE, batch = 8, seq_len = 24, lr = 1e-2,
                           steps = 60, warmup = 5, log_every = 1000, print = function() end}
  return res
end

for _, case in ipairs {{"e1", {}}, {"e23", {n_slots = 4}}, {"e88", {n_heads = 3, n_state = 8}}} do
  t.case("a ladder_lm with the " .. case[1] .. " mixer learns on the CPU", function()
    local res = trains(case[1], case[2])
    local first = res.losses[1]
    t.truthy(first > 5, "starts near log 256: " .. tostring(first))
    local last = 0
    for step = 51, 60 do last = last + res.losses[step] / 10 end
    t.truthy(last < first - 1.5, ("loss fell from %.3f to %.3f (mean of the last 10 steps)"):format(first, last))
  end)
end
