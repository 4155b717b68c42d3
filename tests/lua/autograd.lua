-- Autograd: every differentiable op against central finite differences (engine.gradcheck, f64 on
-- CPU), views, accumulation, engine.grad, no_grad and the errors the issue names.
local t = require "spec"
local engine = require "engine"
local unpack = table.unpack or unpack
local F = engine.F

engine.manual_seed(7)
local function leaf(shape, lo, hi)
  local x = engine.rand(shape, {dtype = "f64"})
  if lo then x = x * (hi - lo) + lo end
  return x:detach():requires_grad(true)
end
local function check(name, fn, inputs, opts)
  t.case("gradcheck " .. name, function() t.truthy(engine.gradcheck(fn, inputs, opts)) end)
end

-- elementwise, unary (inputs kept away from kinks and domain edges)
for _, op in ipairs {"neg", "exp", "tanh", "sigmoid", "silu", "gelu", "softplus"} do
  check(op, function(x) return F[op](x) end, {leaf({3, 4}, -2, 2)})
end
check("log", function(x) return x:log() end, {leaf({5}, 0.5, 2)})
check("sqrt", function(x) return x:sqrt() end, {leaf({5}, 0.5, 2)})
check("rsqrt", function(x) return x:rsqrt() end, {leaf({5}, 0.5, 2)})
check("abs", function(x) return x:abs() end, {leaf({6}, 0.1, 1) * engine.tensor({1, -1, 1, -1, 1, -1}, {dtype = "f64"})})
check("relu", function(x) return x:relu() end, {engine.tensor({-1.5, -0.2, 0.3, 2}, {dtype = "f64"}):requires_grad(true)})

-- binary with broadcasting (gradients summed back to each operand's shape)
for _, op in ipairs {"add", "sub", "mul", "div"} do
  check(op .. " broadcast", function(a, b) return F[op](a, b) end, {leaf({2, 3, 4}, 0.5, 2), leaf({3, 1}, 0.5, 2)})
end
check("pow", function(a, b) return F.pow(a, b) end, {leaf({3, 2}, 0.5, 2), leaf({2}, 0.5, 2)})
check("maximum/minimum", function(a, b) return F.maximum(a, b) + F.minimum(a, b) * 2 end,
      {leaf({4, 3}), leaf({4, 3})})
check("clamp", function(x) return x:clamp(0.3, 0.7) end, {engine.tensor({0.1, 0.4, 0.65, 0.9}, {dtype = "f64"}):requires_grad(true)})
check("where", function(a, b) return engine.where(a:gt(0.5), a, b) end, {leaf({3, 4}), leaf({4})})

-- reductions
check("sum dims", function(x) return x:sum({0, 2}) end, {leaf({2, 3, 4})})
check("sum keepdim", function(x) return x:sum(1, true) end, {leaf({2, 3, 4})})
check("mean", function(x) return x:mean(-1) end, {leaf({3, 5})})
check("mean all", function(x) return x:mean() end, {leaf({3, 5})})
check("max", function(x) return x:max(1) end, {leaf({3, 5})})
check("min all", function(x) return x:min() end, {leaf({3, 5})})
check("var", function(x) return x:var(1) end, {leaf({3, 5})})
check("std", function(x) return x:std(0) end, {leaf({4, 3})})

-- rows
check("softmax", function(x) return x:softmax(-1) end, {leaf({3, 5}, -2, 2)})
check("softmax dim 0", function(x) return x:softmax(0) end, {leaf({3, 5}, -2, 2)})
check("log_softmax", function(x) return x:log_softmax(-1) end, {leaf({3, 5}, -2, 2)})
check("rms_norm", function(x, w) return F.rms_norm(x, w, 1e-5) end, {leaf({3, 6}, -1, 1), leaf({6}, 0.5, 1.5)})
check("rms_norm no weight", function(x) return F.rms_norm(x, nil, 1e-5) end, {leaf({2, 5}, -1, 1)})
check("layer_norm", function(x, w, b) return F.layer_norm(x, w, b, 1e-5) end,
      {leaf({3, 6}, -1, 1), leaf({6}, 0.5, 1.5), leaf({6})})
check("add_rms_norm (both outputs used)", function(x, r, w)
  local y, res = F.add_rms_norm(x, r, w, 1e-5)
  return y, res * 0.5
end, {leaf({3, 6}, -1, 1), leaf({3, 6}, -1, 1), leaf({6}, 0.5, 1.5)})
check("add_rms_norm without residual", function(x, w) return (F.add_rms_norm(x, nil, w, 1e-5)) end,
      {leaf({2, 5}, -1, 1), leaf({5}, 0.5, 1.5)})
local targets = engine.tensor({{1, 0, 3}, {2, 2, -100}}, {dtype = "i64"})
check("cross_entropy (ignore_index)", function(x) return F.cross_entropy(x, targets) end, {leaf({2, 3, 4}, -2, 2)})

-- linear algebra
check("matmul 2-D", function(a, b) return a:matmul(b) end, {leaf({3, 4}), leaf({4, 2})})
check("matmul batched broadcast", function(a, b) return a:matmul(b) end, {leaf({2, 3, 4}), leaf({4, 2})})
check("matmul 1-D left", function(a, b) return a:matmul(b) end, {leaf({4}), leaf({2, 4, 3})})
check("matmul 1-D right", function(a, b) return a:matmul(b) end, {leaf({2, 3, 4}), leaf({4})})
check("matmul dot", function(a, b) return a:matmul(b) end, {leaf({4}), leaf({4})})
for _, act in ipairs {"none", "relu", "gelu"} do
  check("linear " .. act, function(x, w, b) return F.linear(x, w, b, {act = act}) end,
        {leaf({2, 3, 4}, -1, 1), leaf({5, 4}, -1, 1), leaf({5}, -1, 1)})
end

-- indexing (repeated indices accumulate)
local ids = engine.tensor({{1, 3, 1}, {0, 1, 2}}, {dtype = "i64"})
check("embedding", function(w) return F.embedding(ids, w) end, {leaf({4, 3})})
check("index_select", function(x) return x:index_select(1, engine.tensor({2, 0, 2}, {dtype = "i64"})) end, {leaf({2, 3})})
check("gather", function(x) return x:gather(0, engine.tensor({{1, 0, 1}, {1, 1, 0}}, {dtype = "i64"})) end, {leaf({2, 3})})

-- joining and views
check("cat", function(a, b) return engine.cat({a, b}, 1) end, {leaf({2, 3}), leaf({2, 2})})
check("views", function(x)
  local y = x:view(3, 4):t():reshape(2, 6):narrow(1, 1, 4):unsqueeze(0):squeeze(0)
  return y:select(0, 1) * 2 + y:slice(1, 0, 4, 2):sum()
end, {leaf({12})})
check("permute + expand", function(x) return x:permute({2, 0, 1}):unsqueeze(0):expand({3, 4, 2, 1}) * 1.5 end,
      {leaf({2, 1, 4})})
check("split and chunk", function(x)
  local a, b = unpack(x:split(2, 0))
  local c = x:chunk(3, 1)
  return a * b + c[1]:sum()
end, {leaf({4, 3})})
check("dtype round trip", function(x) return (x:to("f32") * 2):to("f64") end, {leaf({4})}, {eps = 1e-3, atol = 1e-3})

-- engine behaviour
t.case("gradients accumulate across backward calls, and set_grad(nil) clears", function()
  local x = engine.tensor({1, 2, 3}, {dtype = "f64"}):requires_grad(true)
  ;(x * x):sum():backward()
  t.near(x:grad():tolist(), {2, 4, 6}, 0)
  ;(x * 3):sum():backward()
  t.near(x:grad():tolist(), {5, 7, 9}, 0)
  x:set_grad(nil)
  t.eq(x:grad(), nil)
end)

t.case("a tensor used twice gets both contributions; grad_fn and is_leaf", function()
  local x = engine.tensor({2, -1}, {dtype = "f64"}):requires_grad(true)
  local y = x * x + x:exp()
  t.eq(x:is_leaf(), true)
  t.eq(y:is_leaf(), false)
  t.eq(y:grad_fn(), "add")
  y:sum():backward()
  t.near(x:grad():tolist(), {4 + math.exp(2), -2 + math.exp(-1)}, 1e-12)
end)

t.case("engine.grad returns gradients without touching .grad", function()
  local x = engine.tensor({1, 2}, {dtype = "f64"}):requires_grad(true)
  local w = engine.tensor({3, 4}, {dtype = "f64"}):requires_grad(true)
  local y = (x * w):sum()
  local g = engine.grad(y, {x, w})
  t.near(g[1]:tolist(), {3, 4}, 0)
  t.near(g[2]:tolist(), {1, 2}, 0)
  t.eq(x:grad(), nil)
  local z = (x * 2):sum()
  local h = z * z
  t.near(engine.grad(h, z):item(), 2 * 6, 0) -- a non-leaf input
end)

t.case("no_grad records nothing; detach cuts the graph", function()
  local x = engine.ones({2}):requires_grad(true)
  local y = engine.no_grad(function() return x * 2 end)
  t.eq(y:requires_grad(), false)
  t.eq(engine.is_grad_enabled(), true)
  t.eq((x * 2):detach():requires_grad(), false)
  local ok = pcall(engine.no_grad, function() error("boom") end)
  t.eq(ok, false)
  t.eq(engine.is_grad_enabled(), true) -- restored after an error
end)

t.case("backward through a freed graph is an error; retain_graph allows it", function()
  local x = engine.tensor({1, 2}, {dtype = "f64"}):requires_grad(true)
  local y = (x:exp()):sum()
  y:backward({retain_graph = true})
  y:backward()
  t.near(x:grad():tolist(), {2 * math.exp(1), 2 * math.exp(2)}, 1e-12)
  t.raises(function() y:backward() end, "second time")
end)

t.case("a saved tensor modified in place is an error", function()
  local x = engine.tensor({1, 2}, {dtype = "f64"}):requires_grad(true)
  local e = x:exp() -- exp saves its output
  local y = (e * 1):sum()
  local z = e:sum()
  engine.no_grad(function() e:fill_(0) end)
  t.raises(function() z:backward() end, "modified in place")
  t.raises(function() y:backward() end, "modified in place")
end)

t.case("non-scalar backward needs a gradient; in-place writes are refused", function()
  local x = engine.ones({3}):requires_grad(true)
  local y = x * 2
  t.raises(function() y:backward() end, "only a one-element output")
  y:backward(engine.tensor({1, 2, 3}))
  t.near(x:grad():tolist(), {2, 4, 6}, 0)
  t.raises(function() x:fill_(1) end, "requires grad")
  t.near(engine.ones({3}):copy_(y):tolist(), {2, 2, 2}, 0) -- reading from the graph is fine
  t.raises(function() engine.tensor({1, 2}, {dtype = "i64"}):requires_grad(true) end, "floating")
  t.raises(function() engine.ones({2}):backward() end, "does not require grad")
end)

t.case("a 2-layer MLP's gradients match finite differences", function()
  local x = leaf({4, 3}, -1, 1):detach()
  local tg = engine.tensor({0, 2, 1, 1}, {dtype = "i64"})
  t.truthy(engine.gradcheck(function(w1, b1, w2)
    local h = F.linear(x, w1, b1):tanh()
    return F.cross_entropy(F.linear(h, w2), tg)
  end, {leaf({5, 3}, -1, 1), leaf({5}, -1, 1), leaf({3, 5}, -1, 1)}))
end)

t.case("a deep chain (10k nodes) backs up and frees without recursion trouble", function()
  local x = engine.ones({1}):requires_grad(true)
  local y = x
  for _ = 1, 10000 do y = y * 1 end
  y:sum():backward()
  t.near(x:grad():tolist(), {1}, 0)
  y = nil
  collectgarbage()
end)
