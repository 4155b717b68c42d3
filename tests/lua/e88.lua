-- engine.F.e88, e88_forward and e88_backward from Lua: a tiny case against plain Lua loops, the
-- shapes and nils of the results, one gradient against finite differences, and misuse.
local t = require "spec"
local engine = require "engine"
local F = engine.F

-- The recurrence in plain Lua for B = H = 1: q, k [T][n], v, g [T][v], decay [T], S0 [n][v].
local function e88_lua(q, k, v, decay, g, S0)
  local T, n, V = #q, #q[1], #v[1]
  local S, y = {}, {}
  for i = 1, n do S[i] = {} for j = 1, V do S[i][j] = S0[i][j] end end
  local function unit(x)
    local s = 0
    for i = 1, #x do s = s + x[i] * x[i] end
    local out = {}
    for i = 1, #x do out[i] = x[i] / (math.sqrt(s) + 1e-6) end
    return out
  end
  for t_ = 1, T do
    local kh, qh, delta = unit(k[t_]), unit(q[t_]), {}
    for j = 1, V do
      local r = 0
      for i = 1, n do r = r + S[i][j] * kh[i] end
      delta[j] = v[t_][j] - r
    end
    for i = 1, n do
      for j = 1, V do
        local p = decay[t_] * S[i][j] + kh[i] * delta[j]
        local e = math.exp(2 * p)
        S[i][j] = (e - 1) / (e + 1)
      end
    end
    y[t_] = {}
    for j = 1, V do
      local o = 0
      for i = 1, n do o = o + S[i][j] * qh[i] end
      local gj = g[t_][j]
      y[t_][j] = o * gj / (1 + math.exp(-gj))
    end
  end
  return y, S
end

local T, n, V = 5, 3, 2
local function inputs()
  local q, Q = t.random_tensor(engine, {1, T, 1, n}, 11, -1, 1)
  local k, K = t.random_tensor(engine, {1, T, 1, n}, 12, -1, 1)
  local v, Vv = t.random_tensor(engine, {1, T, 1, V}, 13, -1, 1)
  local d, D = t.random_tensor(engine, {1, T, 1}, 14, 0.5, 0.99)
  local g, G = t.random_tensor(engine, {1, T, 1, V}, 15, -2, 2)
  local s, S = t.random_tensor(engine, {1, 1, n, V}, 16, -0.5, 0.5)
  return {q, k, v, d, g, s}, {Q, K, Vv, D, G, S}
end

t.case("e88 matches the math", function()
  local x, X = inputs()
  local y, S_T = F.e88(x[1], x[2], x[3], x[4], x[5], {state = x[6]})
  local col = function(A, w) -- [1][T][1][w] -> [T][w]
    local out = {}
    for i = 1, T do out[i] = A[1][i][1] end
    return out
  end
  local D = {}
  for i = 1, T do D[i] = X[4][1][i][1] end
  local want_y, want_S = e88_lua(col(X[1]), col(X[2]), col(X[3]), D, col(X[5]), X[6][1][1])
  t.near(y:tolist()[1], (function() local o = {} for i = 1, T do o[i] = {want_y[i]} end return o end)(), 1e-12)
  t.near(S_T:tolist()[1][1], want_S, 1e-12)
  t.eq(S_T:dtype(), "f64")
end)

t.case("e88_forward and e88_backward: shapes, nils, a finite difference", function()
  local x = inputs()
  local y, S_T, ckpt = F.e88_forward(x[1], x[2], x[3], x[4], nil, {ckpt_every = 2})
  t.eq(ckpt:shape(), {1, 1, 3 * n * V + 2 * T * V}) -- 3 checkpoints, then delta and o of each step
  local dy = engine.ones({1, T, 1, V}, {dtype = "f64"})
  local dq, dk, dv, ddecay, dg, dS0 = F.e88_backward(x[1], x[2], x[3], x[4], nil, nil, ckpt, dy, nil,
                                                      {ckpt_every = 2})
  t.eq(dq:shape(), {1, T, 1, n})
  t.eq(ddecay:shape(), {1, T, 1})
  t.truthy(dg == nil and dS0 == nil, "dg and dS0 are nil without g and S0")
  -- d sum(y) / d v[0, 2, 0, 1] by central differences
  local h, vals = 1e-6, x[3]:tolist()
  local function loss(delta)
    local vv = t.nest(t.flat(vals), {1, T, 1, V})
    vv[1][3][1][2] = vv[1][3][1][2] + delta
    local yy = F.e88(x[1], x[2], engine.tensor(vv, {dtype = "f64"}), x[4], nil, {ckpt_every = 2})
    return yy:sum():item()
  end
  t.near(dv:tolist()[1][3][1][2], (loss(h) - loss(-h)) / (2 * h), 1e-6)
end)

t.case("e88 misuse", function()
  local x = inputs()
  t.raises(function() F.e88(x[1], x[2], x[3], x[4], nil, {stat = x[6]}) end, "e88", "stat")
  t.raises(function() F.e88(x[1], x[2], x[3], x[4], nil, {l2 = 1}) end, "option l2 must be a boolean")
  t.raises(function() F.e88(x[1], x[2], x[3]) end, "e88")
  t.raises(function() F.e88(x[1], x[2], x[3], x[4], nil, {ckpt_every = 0}) end, "ckpt_every must be >= 1")
  t.raises(function() F.e88(x[1], x[1], x[3]:float(), x[4]) end, "v must be f64, got f32")
end)
