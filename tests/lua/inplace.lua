-- In-place tensor methods (add_, sub_, mul_, div_, addcmul_, lerp_, clamp_) and the optimizer
-- functions of engine.F (adamw_, sum_squares, scale_, index_add, scatter_add), against plain Lua
-- loops.
local t = require "spec"
local engine = require "engine"
local F = engine.F

local map, zip = t.map, t.zip

t.case("add_, sub_, mul_, div_ write t, return it, and take numbers and broadcasting tensors", function()
  local x, X = t.random_tensor(engine, {3, 4}, 41, -2, 2)
  local y, Y = t.random_tensor(engine, {3, 4}, 42, 0.5, 2)
  local row, R = t.random_tensor(engine, {4}, 43, -1, 1)
  local v0 = x:clone()
  t.truthy(rawequal(x:add_(y), x), "add_ returns t")
  local want = zip(X, Y, function(a, b) return a + b end)
  t.near(x:tolist(), want, 1e-12)
  x:add_(y, -0.5)
  want = zip(want, Y, function(a, b) return a - 0.5 * b end)
  t.near(x:tolist(), want, 1e-12)
  x:sub_(row)
  for i = 1, 3 do for j = 1, 4 do want[i][j] = want[i][j] - R[j] end end
  t.near(x:tolist(), want, 1e-12)
  x:mul_(3):div_(y)
  want = zip(want, Y, function(a, b) return a * 3 / b end)
  t.near(x:tolist(), want, 1e-12)
  x:sub_(2, 2)
  t.near(x:tolist(), map(want, function(a) return a - 4 end), 1e-12)
  t.near(v0:tolist(), X, 0, "a clone made before is untouched")
end)

t.case("addcmul_ and lerp_", function()
  local x, X = t.random_tensor(engine, {2, 5}, 44, -2, 2)
  local a, A = t.random_tensor(engine, {2, 5}, 45, -2, 2)
  local b, B = t.random_tensor(engine, {5}, 46, -2, 2)
  x:addcmul_(a, b, 0.25)
  local want = {}
  for i = 1, 2 do
    want[i] = {}
    for j = 1, 5 do want[i][j] = X[i][j] + 0.25 * A[i][j] * B[j] end
  end
  t.near(x:tolist(), want, 1e-12)
  x:addcmul_(a, a)
  want = zip(want, A, function(w, v) return w + v * v end)
  t.near(x:tolist(), want, 1e-12)
  x:lerp_(a, 0.1)
  want = zip(want, A, function(w, v) return w + 0.1 * (v - w) end)
  t.near(x:tolist(), want, 1e-12)
  local w = engine.tensor({{0.5}, {2}}, {dtype = "f64"})
  x:lerp_(a, w)
  for i = 1, 2 do
    local wi = i == 1 and 0.5 or 2
    for j = 1, 5 do want[i][j] = want[i][j] + wi * (A[i][j] - want[i][j]) end
  end
  t.near(x:tolist(), want, 1e-12)
end)

t.case("clamp_ with one or both sides", function()
  local x, X = t.random_tensor(engine, {3, 3}, 47, -3, 3)
  x:clamp_(-1, nil)
  local want = map(X, function(v) return math.max(v, -1) end)
  t.near(x:tolist(), want, 0)
  x:clamp_(nil, 0.5)
  t.near(x:tolist(), map(want, function(v) return math.min(v, 0.5) end), 0)
  t.raises(function() x:clamp_() end, "clamp_", "needs lo, hi or both")
end)

t.case("in-place methods in bf16 keep the dtype and round once", function()
  local x = engine.tensor({1, 2, 3, 256}, {dtype = "bf16"})
  x:add_(1)
  t.eq(x:dtype(), "bf16")
  t.eq(x:tolist(), {2, 3, 4, 256}) -- 257 rounds to even (256)
  x:mul_(engine.tensor({2, 2, 2, 2}, {dtype = "bf16"}))
  t.eq(x:tolist(), {4, 6, 8, 512})
end)

t.case("in-place misuse is a clear error", function()
  local x = engine.tensor({{1, 2}, {3, 4}})
  t.raises(function() x:add_(engine.ones({3})) end, "add_", "[3]", "[2,2]")
  t.raises(function() x:t():add_(1) end, "add_", "contiguous")
  local i = engine.tensor({1, 2}, {dtype = "i32"})
  t.raises(function() i:mul_(0.5) end, "mul_", "f32", "i32")
  t.raises(function() i:div_(2) end, "div_", "f32", "i32")
  t.raises(function() x:add_("a") end, "add_", "tensor or a number")
  t.raises(function() engine.tensor({1}, {dtype = "bf16"}):add_(engine.tensor({1})) end, "add_", "f32", "bf16")
end)

-- AdamW in plain Lua (torch.optim.AdamW's formulas), one scalar at a time.
local function adamw_ref(p, g, m, v, h)
  local bc1, bc2 = 1 - h.beta1 ^ h.step, 1 - h.beta2 ^ h.step
  for i = 1, #p do
    p[i] = p[i] * (1 - h.lr * h.weight_decay)
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * g[i]
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * g[i] * g[i]
    p[i] = p[i] - h.lr / bc1 * m[i] / (math.sqrt(v[i]) / math.sqrt(bc2) + h.eps)
  end
end

t.case("F.adamw_ over two tensors for three steps matches plain AdamW", function()
  local P = {t.random_values(6, 51, -1, 1), t.random_values(3, 52, -1, 1)}
  local M, V = {{0, 0, 0, 0, 0, 0}, {0, 0, 0}}, {{0, 0, 0, 0, 0, 0}, {0, 0, 0}}
  local params = {engine.tensor(P[1], {dtype = "f64"}), engine.tensor(P[2], {dtype = "f64"})}
  local ea = {engine.zeros({6}, {dtype = "f64"}), engine.zeros({3}, {dtype = "f64"})}
  local eas = {engine.zeros({6}, {dtype = "f64"}), engine.zeros({3}, {dtype = "f64"})}
  for step = 1, 3 do
    local G = {t.random_values(6, 60 + step, -1, 1), t.random_values(3, 70 + step, -1, 1)}
    local grads = {engine.tensor(G[1], {dtype = "f64"}), engine.tensor(G[2], {dtype = "f64"})}
    local h = {lr = 0.01, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1, step = step}
    t.eq(F.adamw_(params, grads, ea, eas, h), nil)
    for k = 1, 2 do adamw_ref(P[k], G[k], M[k], V[k], h) end
  end
  for k = 1, 2 do
    t.near(params[k]:tolist(), P[k], 1e-12, "params " .. k)
    t.near(ea[k]:tolist(), M[k], 1e-12, "exp_avg " .. k)
    t.near(eas[k]:tolist(), V[k], 1e-12, "exp_avg_sq " .. k)
  end
end)

t.case("F.adamw_ defaults, f32 and bf16 params", function()
  local p = engine.tensor({0.5, -0.25}, {dtype = "bf16"})
  local g = engine.tensor({0.1, 0.2})
  local m, v = engine.zeros({2}), engine.zeros({2})
  F.adamw_({p}, {g}, {m}, {v}, {step = 1})
  local P = {0.5, -0.25}
  adamw_ref(P, {0.1, 0.2}, {0, 0}, {0, 0},
            {lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2, step = 1})
  t.eq(p:dtype(), "bf16")
  t.near(p:tolist(), P, 4e-3)
end)

t.case("F.adamw_ misuse is a clear error", function()
  local p, g = engine.ones({2}), engine.ones({2})
  local m, v = engine.zeros({2}), engine.zeros({2})
  t.raises(function() F.adamw_({p}, {g, g}, {m}, {v}, {step = 1}) end, "adamw_", "grads has 2", "params has 1")
  t.raises(function() F.adamw_({p}, {g}, {m}, {v}, {lr = 0.1}) end, "adamw_", "step", "required")
  t.raises(function() F.adamw_({p}, {g}, {m}, {v}, {step = 0}) end, "adamw_", "step")
  t.raises(function() F.adamw_({p}, {g}, {m}, {v}, {step = 1, beta = 0.9}) end, "adamw_", "beta")
  t.raises(function() F.adamw_({p}, {engine.ones({3})}, {m}, {v}, {step = 1}) end, "adamw_", "[2]", "[3]")
  t.raises(function() F.adamw_({p}, {g}, {m:to("f64")}, {v}, {step = 1}) end, "adamw_", "exp_avg", "f32")
  t.raises(function() F.adamw_({p}, {g}, {m}, {1}, {step = 1}) end, "adamw_", "element 1 of exp_avg_sq")
end)

t.case("F.sum_squares and F.scale_ clip a list of gradients", function()
  local a, A = t.random_tensor(engine, {3, 4}, 81, -2, 2)
  local b, B = t.random_tensor(engine, {5}, 82, -2, 2)
  local want = 0
  for _, v in ipairs(t.flat(A)) do want = want + v * v end
  for _, v in ipairs(t.flat(B)) do want = want + v * v end
  local s = F.sum_squares({a, b})
  t.eq(s:dtype(), "f64")
  t.near(s:item(), want, 1e-12)
  t.eq(F.sum_squares({a:to("f32")}):dtype(), "f32")
  t.eq(F.sum_squares({a:to("bf16"), b}):dtype(), "f64", "any f64 input gives f64")
  t.near(F.sum_squares({a:t()}):item(), want - F.sum_squares({b}):item(), 1e-12)
  local factor = engine.tensor(0.5, {dtype = "f64"})
  t.eq(F.scale_({a, b}, factor), nil)
  t.near(a:tolist(), map(A, function(v) return v * 0.5 end), 1e-15)
  t.near(b:tolist(), map(B, function(v) return v * 0.5 end), 1e-15)
  t.raises(function() F.sum_squares({}) end, "sum_squares", "at least one")
  t.raises(function() F.scale_({a:t()}, factor) end, "scale_", "contiguous")
end)

t.case("F.index_add and F.scatter_add accumulate repeated indices", function()
  local base = engine.tensor({{1, 2}, {3, 4}, {5, 6}}, {dtype = "f64"})
  local src = engine.tensor({{10, 20}, {30, 40}, {50, 60}, {70, 80}}, {dtype = "f64"})
  t.eq(F.index_add(base, 0, {2, 0, 2, 2}, src):tolist(), {{31, 42}, {3, 4}, {135, 166}})
  t.eq(base:tolist(), {{1, 2}, {3, 4}, {5, 6}}, "out of place")
  local idx = engine.tensor({{1, 0}, {1, 1}}, {dtype = "i64"})
  t.eq(F.scatter_add(base, 1, idx, engine.tensor({{1, 2}, {3, 4}, {5, 6}}, {dtype = "f64"})):tolist(),
       {{3, 3}, {3, 11}, {5, 6}})
  t.raises(function() F.index_add(base, 0, {3}, src:narrow(0, 0, 1)) end, "index_add", "index 3 out of range")
end)
