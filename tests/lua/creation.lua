-- Creation functions: shapes given both ways, options, values, random generators, engine.tensor.
local t = require "spec"
local engine = require "engine"

t.case("zeros/ones/empty/full take shapes as a table or as numbers", function()
  t.eq(engine.zeros({2, 3}):shape(), {2, 3})
  t.eq(engine.zeros(2, 3):shape(), {2, 3})
  t.eq(engine.ones(4):shape(), {4})
  t.eq(engine.empty(2, 1, 5):shape(), {2, 1, 5})
  t.eq(engine.zeros({}):shape(), {})
  t.eq(engine.zeros(2, 3):dtype(), "f32")
  t.eq(engine.zeros(2, 3):device(), "cpu")
  t.eq(engine.zeros(2, 3):tolist(), {{0, 0, 0}, {0, 0, 0}})
  t.eq(engine.ones({2, 2}, {dtype = "i64"}):tolist(), {{1, 1}, {1, 1}})
  t.eq(engine.ones(2, 2, {dtype = "f64"}):dtype(), "f64")
  t.eq(engine.full({2, 2}, 7.5):tolist(), {{7.5, 7.5}, {7.5, 7.5}})
  t.eq(engine.full(3, -2, {dtype = "i32"}):tolist(), {-2, -2, -2})
  t.eq(engine.full(3, -2, {dtype = "i32"}):dtype(), "i32")
  t.eq(engine.zeros(0, 3):numel(), 0)
end)

t.case("arange and linspace", function()
  t.eq(engine.arange(5):tolist(), {0, 1, 2, 3, 4})
  t.eq(engine.arange(2, 6):tolist(), {2, 3, 4, 5})
  t.eq(engine.arange(10, 0, -3):tolist(), {10, 7, 4, 1})
  t.near(engine.arange(0, 1, 0.25, {dtype = "f64"}):tolist(), {0, 0.25, 0.5, 0.75}, 1e-12)
  t.eq(engine.arange(4, {dtype = "i64"}):dtype(), "i64")
  t.eq(engine.arange(5):dtype(), "f32")
  local l = engine.linspace(-1, 1, 5, {dtype = "f64"})
  t.near(l:tolist(), {-1, -0.5, 0, 0.5, 1}, 1e-12)
  t.eq(engine.linspace(0, 1, 0):numel(), 0)
end)

t.case("eye", function()
  t.eq(engine.eye(3):tolist(), {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}})
  t.eq(engine.eye(2, 3):tolist(), {{1, 0, 0}, {0, 1, 0}})
  t.eq(engine.eye(2, {dtype = "u8"}):dtype(), "u8")
end)

t.case("rand, randn and randint draw from the seeded generator", function()
  engine.manual_seed(123)
  local a = engine.randn(1000, {dtype = "f64"}):tolist()
  engine.manual_seed(123)
  local b = engine.randn(1000, {dtype = "f64"}):tolist()
  t.eq(a, b, "same seed, same numbers")
  local c = engine.randn(1000, {dtype = "f64"}):tolist()
  t.truthy(c[1] ~= a[1] or c[2] ~= a[2], "the stream advances")

  local n, sum, sq = #a, 0, 0
  for i = 1, n do sum = sum + a[i]; sq = sq + a[i] * a[i] end
  local mean = sum / n
  local std = math.sqrt(sq / n - mean * mean)
  t.truthy(math.abs(mean) < 0.15, "randn mean " .. mean)
  t.truthy(math.abs(std - 1) < 0.15, "randn std " .. std)

  local u = engine.rand(2000, {dtype = "f64"}):tolist()
  local lo, hi, usum = 1, 0, 0
  for i = 1, #u do
    lo, hi, usum = math.min(lo, u[i]), math.max(hi, u[i]), usum + u[i]
  end
  t.truthy(lo >= 0 and hi < 1, "rand in [0, 1)")
  t.truthy(math.abs(usum / #u - 0.5) < 0.05, "rand mean")

  local r = engine.randint(-3, 4, {500})
  t.eq(r:dtype(), "i64")
  local seen = {}
  for _, v in ipairs(r:tolist()) do
    t.truthy(v >= -3 and v < 4 and v == math.floor(v), "randint value " .. v)
    seen[v] = true
  end
  for v = -3, 3 do t.truthy(seen[v], "randint hits " .. v) end
  t.eq(engine.randint(0, 10, 2, 3, {dtype = "i32"}):shape(), {2, 3})
  t.eq(engine.randn(2, 3):shape(), {2, 3})
end)

t.case("engine.tensor from nested tables and numbers", function()
  local x = engine.tensor({{1, 2, 3}, {4, 5, 6}})
  t.eq(x:shape(), {2, 3})
  t.eq(x:dtype(), "f32")
  t.eq(x:tolist(), {{1, 2, 3}, {4, 5, 6}})
  local s = engine.tensor(2.5, {dtype = "f64"})
  t.eq(s:shape(), {})
  t.eq(s:item(), 2.5)
  t.eq(s:tolist(), 2.5)
  t.eq(engine.tensor({}):shape(), {0})
  t.eq(engine.tensor({{}, {}}):shape(), {2, 0})
  local big = engine.tensor({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}}, {dtype = "i64"})
  t.eq(big:shape(), {2, 2, 2})
  t.eq(big:dtype(), "i64")
  t.eq(big:tolist(), {{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}})
  local vals = t.random_values(24, 7, -5, 5)
  local r = engine.tensor(t.nest(vals, {2, 3, 4}), {dtype = "f64"})
  t.near(t.flat(r:tolist()), vals, 0)
end)

t.case("module facts", function()
  t.truthy(engine.device() == "cpu" or engine.device() == "cuda", "device()")
  t.eq(type(engine.version), "string")
  t.eq(engine.dtypes, {"f64", "f32", "f16", "bf16", "i32", "i64", "u8"})
  for _, dt in ipairs(engine.dtypes) do
    t.eq(engine.zeros(2, {dtype = dt}):dtype(), dt)
  end
  t.eq(engine.zeros(2, {dtype = "float32"}):dtype(), "f32")
end)
