-- matmul, engine.F layers (linear, norms, embedding, cross_entropy) and joining/indexing ops,
-- against plain Lua loops.
local t = require "spec"
local engine = require "engine"
local F = engine.F

local function matmul(A, B) -- nested lists
  local out = {}
  for i = 1, #A do
    out[i] = {}
    for j = 1, #B[1] do
      local s = 0
      for k = 1, #B do s = s + A[i][k] * B[k][j] end
      out[i][j] = s
    end
  end
  return out
end

t.case("matmul: 2-D, 1-D and batched", function()
  local a, A = t.random_tensor(engine, {4, 3}, 51)
  local b, B = t.random_tensor(engine, {3, 5}, 52)
  t.near(a:matmul(b):tolist(), matmul(A, B), 1e-12)
  t.near(engine.matmul(a, b):tolist(), matmul(A, B), 1e-12)
  t.near(F.matmul(a, b):tolist(), matmul(A, B), 1e-12)
  t.near(a:float():matmul(b:float()):tolist(), matmul(A, B), 1e-5)
  local v, V = t.random_tensor(engine, {3}, 53)
  local col = {}
  for k = 1, 3 do col[k] = {V[k]} end
  local mv = matmul(A, col)
  t.near(a:matmul(v):tolist(), {mv[1][1], mv[2][1], mv[3][1], mv[4][1]}, 1e-12)
  local batch, BA = t.random_tensor(engine, {2, 4, 3}, 54)
  local out = batch:matmul(b):tolist()
  for n = 1, 2 do t.near(out[n], matmul(BA[n], B), 1e-12) end
  t.near(a:matmul(b:t():t()):tolist(), matmul(A, B), 1e-12, "strided operand")
end)

t.case("linear is x @ W^T + b", function()
  local x, X = t.random_tensor(engine, {2, 3}, 55)
  local w, W = t.random_tensor(engine, {4, 3}, 56)
  local b, Bv = t.random_tensor(engine, {4}, 57)
  local WT = {}
  for k = 1, 3 do
    WT[k] = {}
    for o = 1, 4 do WT[k][o] = W[o][k] end
  end
  local ref = matmul(X, WT)
  t.near(F.linear(x, w):tolist(), ref, 1e-12)
  for i = 1, 2 do for o = 1, 4 do ref[i][o] = ref[i][o] + Bv[o] end end
  t.near(F.linear(x, w, b):tolist(), ref, 1e-12)
end)

t.case("layer_norm and rms_norm over the last dim", function()
  local x, X = t.random_tensor(engine, {3, 6}, 58)
  local w, W = t.random_tensor(engine, {6}, 59, 0.5, 1.5)
  local b, B = t.random_tensor(engine, {6}, 60)
  local ln, rms, ln_plain = {}, {}, {}
  for i = 1, 3 do
    local m, v, sq = 0, 0, 0
    for j = 1, 6 do m = m + X[i][j] / 6 end
    for j = 1, 6 do v = v + (X[i][j] - m) ^ 2 / 6; sq = sq + X[i][j] ^ 2 / 6 end
    ln[i], rms[i], ln_plain[i] = {}, {}, {}
    for j = 1, 6 do
      ln_plain[i][j] = (X[i][j] - m) / math.sqrt(v + 1e-5)
      ln[i][j] = ln_plain[i][j] * W[j] + B[j]
      rms[i][j] = X[i][j] / math.sqrt(sq + 1e-6) * W[j]
    end
  end
  t.near(F.layer_norm(x, w, b):tolist(), ln, 1e-10)
  t.near(F.layer_norm(x, nil, nil, 1e-5):tolist(), ln_plain, 1e-10)
  t.near(F.rms_norm(x, w):tolist(), rms, 1e-10)
  t.near(F.rms_norm(x, w, 1e-6):tolist(), rms, 1e-10)
end)

t.case("embedding picks rows by 0-based ids", function()
  local w, W = t.random_tensor(engine, {5, 3}, 61)
  local ids = engine.tensor({{4, 0}, {2, 2}}, {dtype = "i64"})
  local got = F.embedding(ids, w)
  t.eq(got:shape(), {2, 2, 3})
  t.near(got:tolist(), {{W[5], W[1]}, {W[3], W[3]}}, 0)
end)

t.case("cross_entropy with and without ignore_index", function()
  local logits, L = t.random_tensor(engine, {4, 5}, 62)
  local targets = {3, 0, 4, 1}
  local tt = engine.tensor(targets, {dtype = "i64"})
  local function nll(i, c)
    local m, s = -math.huge, 0
    for j = 1, 5 do m = math.max(m, L[i][j]) end
    for j = 1, 5 do s = s + math.exp(L[i][j] - m) end
    return -(L[i][c + 1] - m - math.log(s))
  end
  local total = 0
  for i = 1, 4 do total = total + nll(i, targets[i]) end
  t.near(F.cross_entropy(logits, tt):item(), total / 4, 1e-12)
  local masked = engine.tensor({3, -100, 4, -100}, {dtype = "i64"})
  t.near(F.cross_entropy(logits, masked):item(), (nll(1, 3) + nll(3, 4)) / 2, 1e-12)
  local seven = engine.tensor({7, 0, 7, 1}, {dtype = "i64"})
  t.near(F.cross_entropy(logits, seven, {ignore_index = 7}):item(), (nll(2, 0) + nll(4, 1)) / 2, 1e-12)
end)

t.case("cat and stack", function()
  local a, A = t.random_tensor(engine, {2, 3}, 63)
  local b, B = t.random_tensor(engine, {1, 3}, 64)
  t.near(engine.cat({a, b}, 0):tolist(), {A[1], A[2], B[1]}, 0)
  t.near(F.cat({a, a}, 1):tolist(), {
    {A[1][1], A[1][2], A[1][3], A[1][1], A[1][2], A[1][3]},
    {A[2][1], A[2][2], A[2][3], A[2][1], A[2][2], A[2][3]},
  }, 0)
  t.near(engine.cat({a, b}):tolist(), {A[1], A[2], B[1]}, 0, "dim defaults to 0")
  local s = engine.stack({a, a * 2}, 0)
  t.eq(s:shape(), {2, 2, 3})
  t.near(s:tolist()[2][1], {2 * A[1][1], 2 * A[1][2], 2 * A[1][3]}, 1e-12)
  t.eq(F.stack({a, a}, 2):shape(), {2, 3, 2})
end)

t.case("index_select and gather", function()
  local x, X = t.random_tensor(engine, {4, 3}, 65)
  local idx = engine.tensor({3, 0, 3}, {dtype = "i64"})
  t.near(x:index_select(0, idx):tolist(), {X[4], X[1], X[4]}, 0)
  t.near(F.index_select(x, 0, {1, 2}):tolist(), {X[2], X[3]}, 0, "a Lua array as index")
  t.near(x:index_select(1, {2}):tolist(), {{X[1][3]}, {X[2][3]}, {X[3][3]}, {X[4][3]}}, 0)
  local g = engine.tensor({{0, 2}, {1, 1}, {2, 0}, {0, 0}}, {dtype = "i64"})
  t.near(x:gather(1, g):tolist(), {
    {X[1][1], X[1][3]}, {X[2][2], X[2][2]}, {X[3][3], X[3][1]}, {X[4][1], X[4][1]},
  }, 0)
  local g0 = engine.tensor({{3, 0, 1}}, {dtype = "i64"})
  t.near(F.gather(x, 0, g0):tolist(), {{X[4][1], X[1][2], X[2][3]}}, 0)
end)
