-- engine.nn modules: forward passes against plain-Lua loops, parameter trees and counts,
-- state_dict round trips and their error messages, to(), train/eval, the printed tree.
local t = require "spec"
local engine = require "engine"
local nn = engine.nn

local function rows(x) return x:double():tolist() end

-- x [N, in] (nested), W [out, in], b [out] or nil -> x W^T + b
local function linear_ref(X, W, B)
  local out = {}
  for i = 1, #X do
    out[i] = {}
    for o = 1, #W do
      local s = B and B[o] or 0
      for k = 1, #W[1] do s = s + X[i][k] * W[o][k] end
      out[i][o] = s
    end
  end
  return out
end

local function silu(v) return v / (1 + math.exp(-v)) end

t.case("Linear: x W^T + b, init std 0.02, zero bias, no-bias option", function()
  engine.manual_seed(1)
  local lin = nn.Linear(5, 4)
  t.eq(lin.weight:shape(), {4, 5})
  t.eq(lin.bias:tolist(), {0, 0, 0, 0})
  engine.no_grad(function() lin.bias:copy_(engine.tensor{0.1, -0.2, 0.3, 0.4}) end)
  local x, X = t.random_tensor(engine, {3, 5}, 5, -1, 1, "f32")
  t.near(rows(lin(x)), linear_ref(X, rows(lin.weight), rows(lin.bias)), 1e-5)
  local nb = nn.Linear(5, 4, {bias = false})
  t.eq(nb.bias, nil)
  t.eq(#nb:parameters(), 1)
  t.near(rows(nb(x)), linear_ref(X, rows(nb.weight)), 1e-5)
  -- std 0.02: the sample std of 64k normals is within 2% of it
  local big = nn.Linear(256, 256)
  local std = big.weight:std():item()
  t.truthy(math.abs(std - 0.02) < 0.0004, "weight std " .. std)
  t.truthy(math.abs(big.weight:mean():item()) < 0.0005, "weight mean")
end)

t.case("Embedding, RMSNorm, LayerNorm against loops; norm weights start at 1", function()
  engine.manual_seed(2)
  local emb = nn.Embedding(10, 3)
  local ids = engine.tensor({{1, 9}, {0, 1}}, {dtype = "i64"})
  local W = rows(emb.weight)
  t.near(rows(emb(ids)), {{W[2], W[10]}, {W[1], W[2]}}, 1e-7)

  local x, X = t.random_tensor(engine, {2, 6}, 21, -2, 2, "f32")
  local rms = nn.RMSNorm(6)
  t.eq(rms.weight:tolist(), {1, 1, 1, 1, 1, 1})
  engine.no_grad(function() rms.weight:copy_(engine.tensor{1, 2, 3, 0.5, -1, 1}) end)
  local Wr = rows(rms.weight)
  local ref = {}
  for i = 1, 2 do
    local ms = 0
    for j = 1, 6 do ms = ms + X[i][j] ^ 2 / 6 end
    ref[i] = {}
    for j = 1, 6 do ref[i][j] = X[i][j] / math.sqrt(ms + 1e-6) * Wr[j] end
  end
  t.near(rows(rms(x)), ref, 1e-5)

  local ln = nn.LayerNorm(6)
  t.eq(ln.weight:tolist(), {1, 1, 1, 1, 1, 1})
  t.eq(ln.bias:tolist(), {0, 0, 0, 0, 0, 0})
  engine.no_grad(function() ln.bias:fill_(0.25) end)
  for i = 1, 2 do
    local m, v = 0, 0
    for j = 1, 6 do m = m + X[i][j] / 6 end
    for j = 1, 6 do v = v + (X[i][j] - m) ^ 2 / 6 end
    for j = 1, 6 do ref[i][j] = (X[i][j] - m) / math.sqrt(v + 1e-5) + 0.25 end
  end
  t.near(rows(ln(x)), ref, 1e-5)
end)

t.case("SwiGLU: down(silu(gate x) * up x)", function()
  engine.manual_seed(3)
  local mlp = nn.SwiGLU(4, 6, {std = 0.5})
  local x, X = t.random_tensor(engine, {3, 4}, 31, -1, 1, "f32")
  local G = linear_ref(X, rows(mlp.gate.weight))
  local U = linear_ref(X, rows(mlp.up.weight))
  local H = {}
  for i = 1, 3 do
    H[i] = {}
    for j = 1, 6 do H[i][j] = silu(G[i][j]) * U[i][j] end
  end
  t.near(rows(mlp(x)), linear_ref(H, rows(mlp.down.weight)), 1e-5)
  t.eq(mlp:num_parameters(), 3 * 4 * 6)
end)

t.case("CausalConv1d: depthwise causal sums over [B, T, D]", function()
  engine.manual_seed(4)
  local B, T, D, K = 2, 7, 3, 4
  local conv = nn.CausalConv1d(D, {kernel = K})
  engine.no_grad(function() conv.bias:copy_(engine.tensor{0.5, -0.5, 1}) end)
  t.eq(conv.weight:shape(), {D, K})
  local x, X = t.random_tensor(engine, {B, T, D}, 41, -1, 1, "f32")
  local Wc, Bc = rows(conv.weight), rows(conv.bias)
  local ref = {}
  for b = 1, B do
    ref[b] = {}
    for s = 1, T do
      ref[b][s] = {}
      for d = 1, D do
        local acc = Bc[d]
        for k = 0, K - 1 do
          local src = s - K + 1 + k
          if src >= 1 then acc = acc + Wc[d][k + 1] * X[b][src][d] end
        end
        ref[b][s][d] = acc
      end
    end
  end
  t.near(rows(conv(x)), ref, 1e-5)
  t.eq(conv:num_parameters(), D * K + D)
  t.raises(function() conv(engine.randn{2, 5, 4}) end, "CausalConv1d", "[2,5,4]")
  local k1 = nn.CausalConv1d(D, {kernel = 1, bias = false})
  local w1 = rows(k1.weight)
  local out = rows(k1(x))
  t.near(out[2][5][3], w1[3][1] * X[2][5][3], 1e-6)
end)

t.case("Dropout: mask of 0 and x/(1-p) in training, seeded; identity in eval", function()
  local drop = nn.Dropout(0.25)
  local x = engine.ones({4000}) * 2
  engine.manual_seed(5)
  local a = drop(x):tolist()
  local zeros = 0
  for _, v in ipairs(a) do
    t.truthy(v == 0 or math.abs(v - 2 / 0.75) < 1e-6, "value " .. v)
    if v == 0 then zeros = zeros + 1 end
  end
  t.truthy(math.abs(zeros / 4000 - 0.25) < 0.03, "dropped fraction " .. zeros / 4000)
  engine.manual_seed(5)
  t.eq(drop(x):tolist(), a, "same seed, same mask")
  drop:eval()
  t.eq(drop(x):tolist(), x:tolist())
  t.raises(function() nn.Dropout(1) end, "Dropout: p")
end)

t.case("Sequential applies in order; parameter names, order, no_decay marks and counts", function()
  engine.manual_seed(6)
  local seq = nn.Sequential(nn.Linear(3, 4), nn.RMSNorm(4), nn.Linear(4, 2, {bias = false}))
  local x = engine.randn{2, 3}
  local ref = seq["3"](seq["2"](seq["1"](x)))
  t.eq(seq(x):tolist(), ref:tolist())
  local names, flags = {}, {}
  for i, e in ipairs(seq:named_parameters()) do names[i], flags[i] = e.name, e.no_decay end
  t.eq(names, {"1.weight", "1.bias", "2.weight", "3.weight"})
  t.eq(flags, {false, true, true, false})
  t.eq(seq:num_parameters(), 3 * 4 + 4 + 4 + 4 * 2)
  t.eq(#seq:parameters(), 4)
  t.eq(#seq:children(), 3)
  t.truthy(seq:parameters()[1]:requires_grad(), "parameters are leaves that require grad")
  t.truthy(seq:parameters()[1]:is_leaf(), "leaf")
  local list = nn.Sequential{nn.Linear(2, 2), nn.Linear(2, 2)}
  t.eq(#list:children(), 2)
end)

t.case("train/eval reach every submodule; the printed tree", function()
  local seq = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.Dropout(0.1), nn.RMSNorm(4)))
  seq:eval()
  t.eq(seq["2"]["1"].training, false)
  seq:train()
  t.eq(seq["2"]["1"].training, true)
  local s = tostring(seq)
  t.truthy(s:find("Sequential(20 params) {", 1, true), s)
  t.truthy(s:find("  (1): Linear(3 -> 4)", 1, true), s)
  t.truthy(s:find("    (1): Dropout(p=0.1)", 1, true), s)
  t.truthy(s:find("    (2): RMSNorm(4, eps=1e-06)", 1, true), s)
end)

t.case("a custom module through Module:extend", function()
  local Scale = nn.Module:extend("Scale")
  function Scale:init(n) self:add_parameter("s", nn.parameter({n}, {fill = 3})) end
  function Scale:forward(x) return x * self.s end
  local m = Scale(2)
  t.eq(m(engine.tensor{1, 2}):tolist(), {3, 6})
  t.eq(m:state_dict().s:tolist(), {3, 3})
  t.raises(function() nn.Module:extend("Empty")():forward() end, "Empty: forward is not defined")
end)

t.case("state_dict round trip through a safetensors file gives identical outputs", function()
  engine.manual_seed(7)
  local function make()
    return nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.SwiGLU(8, 12), nn.CausalConv1d(8))
  end
  local a = make()
  engine.manual_seed(8)
  local b = make()
  local x = engine.randn{2, 5, 4}
  t.truthy(not a(x):allclose(b(x)), "different seeds, different models")
  local path = os.tmpname()
  a:save(path, {note = "hello"})
  local meta = b:load(path)
  os.remove(path)
  t.eq(meta.note, "hello")
  t.eq(b(x):tolist(), a(x):tolist())
  t.truthy(b:parameters()[1]:requires_grad(), "loaded parameters still require grad")
end)

t.case("load_state_dict: strict name, shape and dtype checks with clear messages", function()
  local m = nn.Sequential(nn.Linear(2, 3), nn.RMSNorm(3))
  local sd = m:state_dict()
  local missing = {["1.weight"] = sd["1.weight"], ["1.bias"] = sd["1.bias"]}
  t.raises(function() m:load_state_dict(missing) end, "missing '2.weight'")
  local extra = {["1.weight"] = sd["1.weight"], ["1.bias"] = sd["1.bias"], ["2.weight"] = sd["2.weight"],
                 ["3.weight"] = engine.ones(3)}
  t.raises(function() m:load_state_dict(extra) end, "unexpected '3.weight'")
  local shape = {["1.weight"] = engine.ones(3, 3), ["1.bias"] = sd["1.bias"], ["2.weight"] = sd["2.weight"]}
  t.raises(function() m:load_state_dict(shape) end, "'1.weight' has shape [3,3], the model wants [3,2]")
  local dtype = {["1.weight"] = sd["1.weight"]:double(), ["1.bias"] = sd["1.bias"],
                 ["2.weight"] = sd["2.weight"]}
  t.raises(function() m:load_state_dict(dtype) end, "'1.weight' has dtype f64, the model wants f32")
  -- non-strict: missing and extra keys are fine, what is there is loaded
  m:load_state_dict({["2.weight"] = engine.full({3}, 2), other = engine.ones(1)}, {strict = false})
  t.eq(m["2"].weight:tolist(), {2, 2, 2})
end)

t.case("to(dtype) converts parameters in place into new leaves", function()
  local m = nn.Sequential(nn.Linear(3, 4), nn.RMSNorm(4))
  local before = m["1"].weight:tolist()
  m:to(nil, "f64")
  t.eq(m:dtype(), "f64")
  for _, p in ipairs(m:parameters()) do
    t.eq(p:dtype(), "f64")
    t.truthy(p:requires_grad() and p:is_leaf(), "a leaf requiring grad")
  end
  t.near(m["1"].weight:tolist(), before, 1e-7)
  m:to("cpu", "bf16")
  t.eq(m["1"].weight:dtype(), "bf16")
  t.eq(m:device(), "cpu")
  t.raises(function() m:to(nil, "i64") end, "dtype must be")
end)

t.case("zero_grad clears the gradients", function()
  local m = nn.Linear(3, 2)
  m(engine.randn{4, 3}):sum():backward()
  t.truthy(m.weight:grad() ~= nil, "a gradient after backward")
  m:zero_grad()
  t.eq(m.weight:grad(), nil)
  t.eq(m.bias:grad(), nil)
end)

t.case("without_init counts parameters without initialising them", function()
  local n = nn.without_init(function() return nn.Linear(300, 200):num_parameters() end)
  t.eq(n, 300 * 200 + 200)
  t.raises(function() nn.without_init(function() error("inner failure") end) end, "inner failure")
  -- initialisation is back on afterwards
  t.eq(nn.RMSNorm(2).weight:tolist(), {1, 1})
end)
