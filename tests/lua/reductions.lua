-- Reductions, argmax and softmax against plain Lua loops over tolist().
local t = require "spec"
local engine = require "engine"

local x, X = t.random_tensor(engine, {3, 4, 5}, 41, -3, 3)

-- Reduces X over the dims in `over` (0-based set) with f(list of values) -> number; the result as
-- nested lists of the kept dims (keepdim false), or a number when all dims are reduced.
local function reduce(over, f)
  local shape = {3, 4, 5}
  local groups, order = {}, {}
  for i = 1, 3 do for j = 1, 4 do for k = 1, 5 do
    local idx = {i, j, k}
    local key = {}
    for d = 1, 3 do if not over[d - 1] then key[#key + 1] = idx[d] end end
    local ks = table.concat(key, ",")
    if not groups[ks] then groups[ks] = {}; order[#order + 1] = ks end
    table.insert(groups[ks], X[i][j][k])
  end end end
  local flat = {}
  for n, ks in ipairs(order) do flat[n] = f(groups[ks]) end
  local kept = {}
  for d = 1, 3 do if not over[d - 1] then kept[#kept + 1] = shape[d] end end
  return t.nest(flat, kept)
end

local function sum(v) local s = 0 for _, a in ipairs(v) do s = s + a end return s end
local function mean(v) return sum(v) / #v end
local function var(v, correction)
  local m, s = mean(v), 0
  for _, a in ipairs(v) do s = s + (a - m) ^ 2 end
  return s / (#v - correction)
end
local function max(v) return math.max(unpack(v)) end
local function min(v) return math.min(unpack(v)) end

t.case("sum/mean/max/min over all dims, one dim, several dims", function()
  local all = {[0] = true, [1] = true, [2] = true}
  t.near(x:sum():item(), reduce(all, sum), 1e-12)
  t.near(x:mean():item(), reduce(all, mean), 1e-12)
  t.near(x:max():item(), reduce(all, max), 0)
  t.near(x:min():item(), reduce(all, min), 0)
  t.near(x:sum(1):tolist(), reduce({[1] = true}, sum), 1e-12)
  t.near(x:sum(-1):tolist(), reduce({[2] = true}, sum), 1e-12)
  t.near(x:mean({0, 2}):tolist(), reduce({[0] = true, [2] = true}, mean), 1e-12)
  t.near(x:max(2):tolist(), reduce({[2] = true}, max), 0)
  t.near(x:min(0):tolist(), reduce({[0] = true}, min), 0)
  t.near(engine.F.sum(x, 1):tolist(), reduce({[1] = true}, sum), 1e-12)
  t.eq(x:sum(1, true):shape(), {3, 1, 5})
  t.eq(x:mean({0, 2}, true):shape(), {1, 4, 1})
  t.eq(x:sum(nil, true):shape(), {1, 1, 1})
  t.eq(x:sum({}):shape(), {})
end)

t.case("var and std with the default and a given correction", function()
  t.near(x:var(1):tolist(), reduce({[1] = true}, function(v) return var(v, 1) end), 1e-12)
  t.near(x:var(1, false, {correction = 0}):tolist(), reduce({[1] = true}, function(v) return var(v, 0) end), 1e-12)
  t.near(x:std(2):tolist(), reduce({[2] = true}, function(v) return math.sqrt(var(v, 1)) end), 1e-12)
  t.near(x:std({correction = 0}):item(),
         reduce({[0] = true, [1] = true, [2] = true}, function(v) return math.sqrt(var(v, 0)) end), 1e-12)
  t.eq(x:var(0, true, {correction = 0}):shape(), {1, 4, 5})
end)

t.case("sum of integers is i64; argmax", function()
  local i = engine.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = "i32"})
  t.eq(i:sum():dtype(), "i64")
  t.eq(i:sum():item(), 21)
  t.eq(i:sum(0):tolist(), {5, 7, 9})
  local function argmax(v)
    local best = 1
    for n = 2, #v do if v[n] > v[best] then best = n end end
    return best - 1
  end
  t.eq(x:argmax(2):tolist(), reduce({[2] = true}, argmax))
  t.eq(x:argmax(2):dtype(), "i64")
  t.eq(x:argmax(0, true):shape(), {1, 4, 5})
  local flat = t.flat(X)
  t.eq(x:argmax():item(), argmax(flat))
end)

t.case("softmax and log_softmax along a dim", function()
  local function softmax_rows(dim)
    local out = {}
    for i = 1, 3 do
      out[i] = {}
      for j = 1, 4 do
        out[i][j] = {}
        for k = 1, 5 do out[i][j][k] = 0 end
      end
    end
    local sizes = {3, 4, 5}
    for i = 1, 3 do for j = 1, 4 do for k = 1, 5 do
      local idx = {i, j, k}
      local m, s = -math.huge, 0
      for n = 1, sizes[dim + 1] do
        idx[dim + 1] = n
        m = math.max(m, X[idx[1]][idx[2]][idx[3]])
      end
      for n = 1, sizes[dim + 1] do
        idx[dim + 1] = n
        s = s + math.exp(X[idx[1]][idx[2]][idx[3]] - m)
      end
      out[i][j][k] = math.exp(X[i][j][k] - m) / s
    end end end
    return out
  end
  t.near(x:softmax(2):tolist(), softmax_rows(2), 1e-12)
  t.near(x:softmax():tolist(), softmax_rows(2), 1e-12, "default dim is the last")
  t.near(engine.F.softmax(x, 0):tolist(), softmax_rows(0), 1e-12)
  local sm1 = softmax_rows(1)
  local logs = {}
  for i = 1, 3 do
    logs[i] = {}
    for j = 1, 4 do
      logs[i][j] = {}
      for k = 1, 5 do logs[i][j][k] = math.log(sm1[i][j][k]) end
    end
  end
  t.near(x:log_softmax(1):tolist(), logs, 1e-12)
  t.near(engine.F.log_softmax(x:float(), 1):tolist(), logs, 1e-5)
end)
