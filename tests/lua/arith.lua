-- Elementwise math: operators with numbers on either side, unary ops, binary ops with
-- broadcasting, comparisons, clamp and where, all against plain Lua loops.
local t = require "spec"
local engine = require "engine"

local map, zip = t.map, t.zip

local function erf(x) -- Maclaurin series; exact to ~1e-15 for |x| <= 3
  local sum, term, n = 0, x, 0
  repeat
    local add = term / (2 * n + 1)
    sum = sum + add
    n = n + 1
    term = -term * x * x / n
  until math.abs(add) < 1e-17
  return 2 / math.sqrt(math.pi) * sum
end

local x, X = t.random_tensor(engine, {3, 4}, 31, -2, 2)
local p, P = t.random_tensor(engine, {3, 4}, 32, 0.1, 3) -- positive, for log/sqrt/pow

t.case("operators with tensors and numbers on either side", function()
  t.near((x + 1.5):tolist(), map(X, function(v) return v + 1.5 end), 1e-12)
  t.near((1.5 + x):tolist(), map(X, function(v) return 1.5 + v end), 1e-12)
  t.near((x - 0.25):tolist(), map(X, function(v) return v - 0.25 end), 1e-12)
  t.near((2 - x):tolist(), map(X, function(v) return 2 - v end), 1e-12)
  t.near((x * 3):tolist(), map(X, function(v) return v * 3 end), 1e-12)
  t.near((3 * x):tolist(), map(X, function(v) return 3 * v end), 1e-12)
  t.near((x / 4):tolist(), map(X, function(v) return v / 4 end), 1e-12)
  t.near((4 / p):tolist(), map(P, function(v) return 4 / v end), 1e-12)
  t.near((p ^ 2.5):tolist(), map(P, function(v) return v ^ 2.5 end), 1e-12)
  t.near((2 ^ x):tolist(), map(X, function(v) return 2 ^ v end), 1e-12)
  t.near((-x):tolist(), map(X, function(v) return -v end), 0)
  t.near((x + p):tolist(), zip(X, P, function(a, b) return a + b end), 1e-12)
  t.near((x * p - x / p):tolist(), zip(X, P, function(a, b) return a * b - a / b end), 1e-12)
  local f = x:float()
  t.eq((f + 1):dtype(), "f32", "a number takes the tensor's dtype")
  t.near((f * 0.1):tolist(), map(f:tolist(), function(v) return v * 0.1 end), 1e-6)
end)

t.case("numbers with integer tensors never truncate silently", function()
  local i = engine.tensor({1, -2, 7}, {dtype = "i32"})
  t.eq((i + 1):dtype(), "i32")
  t.eq((i + 1):tolist(), {2, -1, 8})
  t.eq((i + 0.5):dtype(), "f32")
  t.eq((i + 0.5):tolist(), {1.5, -1.5, 7.5})
  t.eq((i * 2.5):tolist(), {2.5, -5, 17.5})
  t.eq((i / 2):tolist(), {0.5, -1, 3.5}, "integer division is true division")
  local u = engine.tensor({1, 2}, {dtype = "u8"})
  t.eq((u + 300):tolist(), {301, 302}, "a number outside u8 widens")
  t.eq((u - 0.5):tolist(), {0.5, 1.5})
end)

t.case("unary ops as methods and as engine.F functions", function()
  local refs = {
    neg = function(v) return -v end,
    abs = math.abs,
    exp = math.exp,
    tanh = function(v) return (math.exp(v) - math.exp(-v)) / (math.exp(v) + math.exp(-v)) end,
    sigmoid = function(v) return 1 / (1 + math.exp(-v)) end,
    silu = function(v) return v / (1 + math.exp(-v)) end,
    gelu = function(v) return 0.5 * v * (1 + erf(v / math.sqrt(2))) end,
    relu = function(v) return math.max(v, 0) end,
    softplus = function(v) return math.log(1 + math.exp(v)) end,
  }
  for name, ref in pairs(refs) do
    t.near(x[name](x):tolist(), map(X, ref), 1e-12, name)
    t.near(engine.F[name](x):tolist(), map(X, ref), 1e-12, "F." .. name)
  end
  local positive = {log = math.log, sqrt = math.sqrt, rsqrt = function(v) return 1 / math.sqrt(v) end}
  for name, ref in pairs(positive) do
    t.near(p[name](p):tolist(), map(P, ref), 1e-12, name)
  end
  t.near(x:float():tanh():tolist(), map(X, refs.tanh), 1e-6, "f32 tanh")
  t.eq(engine.F.tanh, x.tanh, "method and F are one function")
end)

t.case("binary ops broadcast", function()
  local row, R = t.random_tensor(engine, {4}, 33)
  local col, C = t.random_tensor(engine, {3, 1}, 34)
  local function ref2(f, A, B)
    local out = {}
    for i = 1, 3 do
      out[i] = {}
      for j = 1, 4 do out[i][j] = f(A(i, j), B(i, j)) end
    end
    return out
  end
  local function xs(i, j) return X[i][j] end
  local function rs(_, j) return R[j] end
  local function cs(i, _) return C[i][1] end
  t.near(x:add(row):tolist(), ref2(function(a, b) return a + b end, xs, rs), 1e-12)
  t.near(engine.F.sub(x, col):tolist(), ref2(function(a, b) return a - b end, xs, cs), 1e-12)
  t.near(col:mul(row):tolist(), ref2(function(a, b) return a * b end, cs, rs), 1e-12)
  t.near(x:maximum(row):tolist(), ref2(math.max, xs, rs), 0)
  t.near(x:minimum(col):tolist(), ref2(math.min, xs, cs), 0)
  t.near(x:div(row):tolist(), ref2(function(a, b) return a / b end, xs, rs), 1e-12)
  t.near(p:pow(col):tolist(), ref2(function(a, b) return a ^ b end, function(i, j) return P[i][j] end, cs), 1e-12)
end)

t.case("comparisons give u8 zeros and ones", function()
  local y, Y = t.random_tensor(engine, {3, 4}, 35)
  local cmp = {
    eq = function(a, b) return a == b end, ne = function(a, b) return a ~= b end,
    lt = function(a, b) return a < b end, le = function(a, b) return a <= b end,
    gt = function(a, b) return a > b end, ge = function(a, b) return a >= b end,
  }
  for name, f in pairs(cmp) do
    local got = x[name](x, y)
    t.eq(got:dtype(), "u8", name)
    t.eq(got:tolist(), zip(X, Y, function(a, b) return f(a, b) and 1 or 0 end), name)
    t.eq(x[name](x, 0):tolist(), map(X, function(a) return f(a, 0) and 1 or 0 end), name .. " with 0")
  end
  t.eq(x:eq(x):tolist(), map(X, function() return 1 end))
end)

t.case("clamp and where", function()
  t.near(x:clamp(-0.5, 0.5):tolist(), map(X, function(v) return math.min(math.max(v, -0.5), 0.5) end), 0)
  t.near(x:clamp(0):tolist(), map(X, function(v) return math.max(v, 0) end), 0)
  t.near(x:clamp(nil, 0.25):tolist(), map(X, function(v) return math.min(v, 0.25) end), 0)
  t.near(engine.F.clamp(x, -1, 1):tolist(), map(X, function(v) return math.min(math.max(v, -1), 1) end), 0)
  local y, Y = t.random_tensor(engine, {3, 4}, 36)
  local c = x:gt(0)
  local pick = zip(X, Y, function(a, b) return a > 0 and a or b end)
  t.near(engine.where(c, x, y):tolist(), pick, 0)
  t.near(engine.F.where(c, x, y):tolist(), pick, 0)
  t.near(x:where(c, y):tolist(), pick, 0)
  t.near(x:where(c, -1):tolist(), map(X, function(a) return a > 0 and a or -1 end), 0)
  t.near(engine.where(c, 1, y):tolist(), zip(X, Y, function(a, b) return a > 0 and 1 or b end), 0)
  t.eq(engine.where(c, 2.5, -2.5):tolist(), map(X, function(a) return a > 0 and 2.5 or -2.5 end))
end)
