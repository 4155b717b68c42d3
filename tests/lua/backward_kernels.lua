-- engine.F.softmax_backward, rms_norm_backward, layer_norm_backward, cross_entropy_backward and
-- add_rms_norm from Lua: against plain Lua loops (add_rms_norm, softmax, cross-entropy) and against
-- finite differences of the forward ops (the norms), plus their argument errors.
local t = require "spec"
local engine = require "engine"
local F = engine.F

-- d/dx of sum(gy * f(x)) by central differences, as nested lists shaped like x.
local function fd(f, x, gy)
  local h, flat_x = 1e-6, t.flat(x:tolist())
  local grad, shape = {}, x:shape()
  local function loss(vals)
    local y = f(engine.tensor(t.nest(vals, shape), {dtype = "f64"}))
    return (y * gy):sum():item()
  end
  for i = 1, #flat_x do
    local keep = flat_x[i]
    flat_x[i] = keep + h
    local up = loss(flat_x)
    flat_x[i] = keep - h
    local down = loss(flat_x)
    flat_x[i] = keep
    grad[i] = (up - down) / (2 * h)
  end
  return t.nest(grad, shape)
end

t.case("rms_norm_backward and layer_norm_backward match finite differences", function()
  local x = t.random_tensor(engine, {3, 5}, 201)
  local gy = t.random_tensor(engine, {3, 5}, 202)
  local w = t.random_tensor(engine, {5}, 203, 0.5, 1.5)
  local b = t.random_tensor(engine, {5}, 204)
  local gx, gw = F.rms_norm_backward(gy, x, w, 1e-6)
  t.near(gx:tolist(), fd(function(v) return F.rms_norm(v, w, 1e-6) end, x, gy), 1e-6, "rms gx")
  t.near(gw:tolist(), fd(function(v) return F.rms_norm(x, v, 1e-6) end, w, gy), 1e-6, "rms gw")
  local gx2, gw2 = F.rms_norm_backward(gy, x)
  t.eq(gw2, nil, "no weight, no gw")
  t.near(gx2:tolist(), fd(function(v) return F.rms_norm(v) end, x, gy), 1e-6, "rms gx, no weight")
  local lx, lw, lb = F.layer_norm_backward(gy, x, w, b, 1e-5)
  t.near(lx:tolist(), fd(function(v) return F.layer_norm(v, w, b) end, x, gy), 1e-6, "layer gx")
  t.near(lw:tolist(), fd(function(v) return F.layer_norm(x, v, b) end, w, gy), 1e-6, "layer gw")
  t.near(lb:tolist(), fd(function(v) return F.layer_norm(x, w, v) end, b, gy), 1e-6, "layer gb")
  local _, nw, nb = F.layer_norm_backward(gy, x, nil, b)
  t.eq(nw, nil, "no weight, no gw")
  t.near(nb:tolist(), gy:sum(0):tolist(), 1e-12, "gb is the column sum of gy")
end)

t.case("softmax_backward is y * (gy - sum(gy * y)) and log_softmax's gy - exp(y) * sum(gy)", function()
  local x = t.random_tensor(engine, {2, 4}, 211)
  local gy, G = t.random_tensor(engine, {2, 4}, 212)
  local y, ly = x:softmax(-1), x:log_softmax(-1)
  local Y, LY = y:tolist(), ly:tolist()
  local want, lwant = {}, {}
  for i = 1, 2 do
    local s, sg = 0, 0
    for k = 1, 4 do s, sg = s + G[i][k] * Y[i][k], sg + G[i][k] end
    want[i], lwant[i] = {}, {}
    for k = 1, 4 do
      want[i][k] = Y[i][k] * (G[i][k] - s)
      lwant[i][k] = G[i][k] - math.exp(LY[i][k]) * sg
    end
  end
  t.near(F.softmax_backward(gy, y, -1):tolist(), want, 1e-12)
  t.near(F.softmax_backward(gy, ly, 1, true):tolist(), lwant, 1e-12)
  t.near(F.softmax_backward(gy:float(), y:float(), -1):tolist(), want, 1e-5, "f32")
end)

t.case("cross_entropy_backward is (softmax - onehot) * gloss / n_valid", function()
  local x, X = t.random_tensor(engine, {3, 4}, 221)
  local targets = engine.tensor({2, -100, 0}, {dtype = "i64"})
  local g = F.cross_entropy_backward(x, targets, engine.tensor(0.5, {dtype = "f64"})):tolist()
  local by_number = F.cross_entropy_backward(x, targets, 0.5):tolist()
  local tg = {2, nil, 0}
  for i = 1, 3 do
    local s = 0
    for k = 1, 4 do s = s + math.exp(X[i][k]) end
    for k = 1, 4 do
      local want = 0
      if tg[i] then want = (math.exp(X[i][k]) / s - (k - 1 == tg[i] and 1 or 0)) * 0.5 / 2 end
      t.near(g[i][k], want, 1e-12, "row " .. i)
      t.near(by_number[i][k], want, 1e-12, "gloss as a number")
    end
  end
  local gi = F.cross_entropy_backward(x, engine.tensor({2, 1, 0}, {dtype = "i64"}), 1,
                                      {ignore_index = 1}):tolist()
  t.near(gi[2], {0, 0, 0, 0}, 0, "ignore_index option")
end)

t.case("add_rms_norm keeps the residual stream in f32 and normalises it", function()
  local x = t.random_tensor(engine, {2, 3}, 231, -2, 2, "bf16")
  local r = t.random_tensor(engine, {2, 3}, 232, -2, 2, "f32")
  local w = engine.tensor({0.5, 1, 2}, {dtype = "bf16"})
  local y, h = F.add_rms_norm(x, r, w, 1e-6)
  t.eq(h:dtype(), "f32")
  t.eq(y:dtype(), "bf16")
  local xv, rv, H = t.flat(x:tolist()), t.flat(r:tolist()), t.flat(h:tolist())
  local want = {}
  for i = 0, 1 do
    local ms = 0
    for k = 1, 3 do
      t.near(H[i * 3 + k], xv[i * 3 + k] + rv[i * 3 + k], 1e-7, "residual_out")
      ms = ms + H[i * 3 + k] ^ 2 / 3
    end
    for k = 1, 3 do want[i * 3 + k] = H[i * 3 + k] / math.sqrt(ms + 1e-6) * ({0.5, 1, 2})[k] end
  end
  t.near(t.flat(y:tolist()), want, 1e-2, "y")
  local y2, h2 = F.add_rms_norm(x, nil, nil)
  t.near(h2:tolist(), x:float():tolist(), 0, "no residual: x widened")
  t.near(y2:tolist(), F.rms_norm(x:float()):to("bf16"):tolist(), 1e-2, "no weight")
end)

t.case("backward kernels reject bad arguments with the op's name", function()
  local x = engine.randn({2, 3})
  t.raises(function() F.rms_norm_backward(x, engine.randn({2, 4})) end, "rms_norm_backward",
           "gy has shape [2,3] but x has [2,4]")
  t.raises(function() F.softmax_backward(x, x) end, "softmax_backward", "argument 3")
  t.raises(function() F.softmax_backward(x, x, 0, "yes") end, "softmax_backward", "boolean")
  t.raises(function() F.cross_entropy_backward(x, engine.tensor({0, 1}, {dtype = "i64"}),
                                               engine.ones({2})) end,
           "cross_entropy_backward", "one-element")
  t.raises(function() F.cross_entropy_backward(x, engine.tensor({0, 1}, {dtype = "i64"}), 1,
                                               {ignore = 1}) end, "cross_entropy_backward")
  t.raises(function() F.add_rms_norm(x:to("bf16"), x:to("f16"), nil) end, "add_rms_norm",
           "residual must be f32, f64 or x's dtype")
  t.raises(function() F.layer_norm_backward(x, x, nil, nil, 1e-5, 7) end, "layer_norm_backward",
           "unexpected argument")
end)
