-- engine.F.e1 / e23 and their plain op functions (e1_forward, e1_backward, e23_forward,
-- e23_backward) from Lua: the cells written out in Lua loops, one finite-difference check of each
-- backward, bad options as errors, and autograd through both (gradcheck).
local t = require "spec"
local engine = require "engine"
local F = engine.F

local function sigmoid(v) return 1 / (1 + math.exp(-v)) end
local function tanh(v) local e = math.exp(2 * v) return (e - 1) / (e + 1) end

-- d loss / d W[i][j] by a central difference of step 1e-6 (W f64, loss a function of a matrix).
local function central_difference(loss, W, i, j)
  local eps, Wl = 1e-6, W:tolist()
  Wl[i][j] = Wl[i][j] + eps
  local lp = loss(engine.tensor(Wl, {dtype = "f64"}))
  Wl[i][j] = Wl[i][j] - 2 * eps
  local lm = loss(engine.tensor(Wl, {dtype = "f64"}))
  return (lp - lm) / (2 * eps)
end

-- E1 of one batch row: xw, z nested [T][d], W [d][d], b [d], h0 [d]
local function e1_ref(XW, Z, W, Bv, H0)
  local h, ys = H0, {}
  for s = 1, #XW do
    local hn, y = {}, {}
    for i = 1, #Bv do
      local pre = XW[s][i] + Bv[i]
      for j = 1, #Bv do pre = pre + W[i][j] * h[j] end
      hn[i] = tanh(pre)
      y[i] = hn[i] * Z[s][i] * sigmoid(Z[s][i])
    end
    h, ys[s] = hn, y
  end
  return ys, h
end

t.case("e1 is the gated Elman cell", function()
  local xw, XW = t.random_tensor(engine, {1, 3, 2}, 11, -1, 1)
  local z, Z = t.random_tensor(engine, {1, 3, 2}, 12)
  local W, WV = t.random_tensor(engine, {2, 2}, 13, -0.7, 0.7)
  local b, BV = t.random_tensor(engine, {2}, 14, -0.5, 0.5)
  local h0, H0 = t.random_tensor(engine, {1, 2}, 15, -0.9, 0.9)
  local y, hT = F.e1(xw, z, W, b, {state = h0})
  local ys, h = e1_ref(XW[1], Z[1], WV, BV, H0[1])
  t.near(y:tolist(), {ys}, 1e-12)
  t.near(hT:tolist(), {h}, 1e-12)
  local y2, hT2, hs = F.e1_forward(xw, z, W, b, {state = h0})
  t.near(y2:tolist(), y:tolist(), 0)
  t.near(hs:tolist()[1][3], hT2:tolist()[1], 0, "hs ends at h_T")
  t.eq(hT2:shape(), {1, 2})
  -- without a state the chain starts from zeros
  local y0 = F.e1(xw, z, W, b)
  t.near(y0:tolist(), {(e1_ref(XW[1], Z[1], WV, BV, {0, 0}))}, 1e-12)
  t.raises(function() F.e1(xw, z, W, b, {stat = h0}) end, "e1", "stat")
  t.raises(function() F.e1(xw, z, W) end, "e1")
  t.raises(function() F.e1(xw, z, W, b:float()) end, "b has dtype f32")
end)

t.case("e1_backward matches a finite difference", function()
  local xw = t.random_tensor(engine, {2, 4, 3}, 21, -1, 1)
  local z = t.random_tensor(engine, {2, 4, 3}, 22)
  local W = t.random_tensor(engine, {3, 3}, 23, -0.7, 0.7)
  local b = t.random_tensor(engine, {3}, 24, -0.5, 0.5)
  local dy = t.random_tensor(engine, {2, 4, 3}, 25, -1, 1)
  local _, _, hs = F.e1_forward(xw, z, W, b)
  local dxw, dz, dW, db, dh0 = F.e1_backward(z, W, nil, hs, dy, nil)
  t.eq(dxw:shape(), {2, 4, 3}); t.eq(dz:shape(), {2, 4, 3}); t.eq(db:shape(), {3}); t.eq(dh0:shape(), {2, 3})
  local function loss(Wt) return (F.e1(xw, z, Wt, b) * dy):sum():item() end
  t.near(dW:tolist()[2][3], central_difference(loss, W, 2, 3), 1e-7)
end)

-- E23 of one batch row: tape [N][d]
local function e23_ref(XW, Wh, Ww, Bv, H0, TAPE)
  local d, N = #Bv, #TAPE
  local scale = 1 / math.sqrt(d)
  local H, h, hs = {}, H0, {}
  for i = 1, N do H[i] = {unpack(TAPE[i])} end
  local function softmax(v)
    local mx, s, p = -math.huge, 0, {}
    for i = 1, #v do mx = math.max(mx, v[i]) end
    for i = 1, #v do p[i] = math.exp(v[i] - mx); s = s + p[i] end
    for i = 1, #v do p[i] = p[i] / s end
    return p
  end
  local function scores(v)
    local sc = {}
    for i = 1, N do
      sc[i] = 0
      for j = 1, d do sc[i] = sc[i] + H[i][j] * v[j] * scale end
    end
    return sc
  end
  for s = 1, #XW do
    local r, hn, w = softmax(scores(h)), {}, {}
    for j = 1, d do
      local pre = XW[s][j] + Bv[j]
      for k = 1, d do pre = pre + Wh[j][k] * h[k] end
      for i = 1, N do pre = pre + r[i] * H[i][j] end
      hn[j] = tanh(pre)
    end
    for j = 1, d do
      w[j] = 0
      for k = 1, d do w[j] = w[j] + Ww[j][k] * hn[k] end
    end
    local a = softmax(scores(hn))
    for i = 1, N do
      for j = 1, d do H[i][j] = (1 - a[i]) * H[i][j] + a[i] * w[j] end
    end
    h, hs[s] = hn, hn
  end
  return hs, h, H
end

t.case("e23 is the dual-memory cell", function()
  local xw, XW = t.random_tensor(engine, {1, 3, 2}, 31, -1, 1)
  local Wh, WHV = t.random_tensor(engine, {2, 2}, 32, -0.7, 0.7)
  local Ww, WWV = t.random_tensor(engine, {2, 2}, 33, -0.7, 0.7)
  local b, BV = t.random_tensor(engine, {2}, 34, -0.5, 0.5)
  local h0, H0 = t.random_tensor(engine, {1, 2}, 35, -0.9, 0.9)
  local tape0, TAPE = t.random_tensor(engine, {1, 3, 2}, 36, -1, 1)
  local hs, hT, tapeT = F.e23(xw, Wh, Ww, b, {state = h0, tape = tape0})
  local rhs, rh, rH = e23_ref(XW[1], WHV, WWV, BV, H0[1], TAPE[1])
  t.near(hs:tolist(), {rhs}, 1e-12)
  t.near(hT:tolist(), {rh}, 1e-12)
  t.near(tapeT:tolist(), {rH}, 1e-12)
  local _, _, _, ck = F.e23_forward(xw, Wh, Ww, b, {state = h0, tape = tape0, ckpt_every = 2})
  -- ckpt [B, W]: 2 checkpoints of 3x2, then a [3][3], r [3][3], w [3][2]
  t.eq(ck:shape(), {1, 2 * 3 * 2 + 3 * (2 * 3 + 2)})
  local row, first = ck:tolist()[1], {}
  for i = 1, 3 do first[i] = {row[2 * i - 1], row[2 * i]} end
  t.near(first, TAPE[1], 0, "the first checkpoint is tape0")
  for s = 0, 5 do -- a_t and r_t are softmaxes
    local sum = 0
    for i = 1, 3 do sum = sum + row[12 + 3 * s + i] end
    t.near(sum, 1, 1e-12, "a and r sum to 1")
  end
  -- without a tape, n_slots says how many slots
  local _, _, t2 = F.e23(xw, Wh, Ww, b, {n_slots = 4})
  t.eq(t2:shape(), {1, 4, 2})
  t.raises(function() F.e23(xw, Wh, Ww, b) end, "n_slots must be >= 1")
  t.raises(function() F.e23(xw, Wh, Ww, b, {n_slots = 2, ckpt_every = 0}) end, "checkpoint interval")
  t.raises(function() F.e23(xw, Wh, Ww, b, {slots = 2}) end, "e23", "slots")
end)

t.case("e23_backward matches a finite difference", function()
  local xw = t.random_tensor(engine, {2, 5, 3}, 41, -1, 1)
  local Wh = t.random_tensor(engine, {3, 3}, 42, -0.7, 0.7)
  local Ww = t.random_tensor(engine, {3, 3}, 43, -0.7, 0.7)
  local b = t.random_tensor(engine, {3}, 44, -0.5, 0.5)
  local tape0 = t.random_tensor(engine, {2, 4, 3}, 45, -1, 1)
  local dhs = t.random_tensor(engine, {2, 5, 3}, 46, -1, 1)
  local opts = {tape = tape0, ckpt_every = 2}
  local hs, _, _, ck = F.e23_forward(xw, Wh, Ww, b, opts)
  local dxw, dWh, dWw, db, dh0, dtape0 =
    F.e23_backward(xw, Wh, Ww, b, nil, hs, ck, dhs, nil, nil, {ckpt_every = 2})
  t.eq(dxw:shape(), {2, 5, 3}); t.eq(dWh:shape(), {3, 3}); t.eq(db:shape(), {3})
  t.eq(dh0:shape(), {2, 3}); t.eq(dtape0:shape(), {2, 4, 3})
  local function loss(Wt) return (F.e23(xw, Wh, Wt, b, opts) * dhs):sum():item() end
  t.near(dWw:tolist()[3][1], central_difference(loss, Ww, 3, 1), 1e-7)
end)

t.case("autograd through e1 and e23 passes gradcheck", function()
  local function leaf(shape, seed, s) return (t.random_tensor(engine, shape, seed, -s, s)):requires_grad(true) end
  local xw, z, W, b, h0 = leaf({2, 4, 3}, 51, 1), leaf({2, 4, 3}, 52, 2), leaf({3, 3}, 53, 0.6),
    leaf({3}, 54, 0.5), leaf({2, 3}, 55, 0.9)
  t.truthy(engine.gradcheck(function(xw, z, W, b, h0)
    local y, hT = F.e1(xw, z, W, b, {state = h0})
    return (y * y):sum() + hT:sum()
  end, {xw, z, W, b, h0}), "e1")
  local Ww, tape = leaf({3, 3}, 56, 0.6), leaf({2, 5, 3}, 57, 1)
  t.truthy(engine.gradcheck(function(xw, W, Ww, b, h0, tape)
    local hs, hT, tT = F.e23(xw, W, Ww, b, {state = h0, tape = tape, ckpt_every = 3})
    return (hs * hs):sum() + hT:sum() + (tT * tT):sum()
  end, {xw, W, Ww, b, h0, tape}), "e23")
end)
