-- Views: their values against Lua-computed references, and that they share memory with the base.
local t = require "spec"
local engine = require "engine"

local x, X = t.random_tensor(engine, {2, 3, 4}, 21) -- X[i][j][k] = x[i-1][j-1][k-1]
local flatX = t.flat(X)

t.case("view and reshape keep row-major order", function()
  t.eq(x:view(6, 4):shape(), {6, 4})
  t.eq(t.flat(x:view({6, 4}):tolist()), flatX)
  t.eq(x:view(-1):shape(), {24})
  t.eq(x:view(4, -1):shape(), {4, 6})
  t.eq(t.flat(x:reshape(3, 8):tolist()), flatX)
  local tr = x:transpose(0, 2)
  local want = {}
  for k = 1, 4 do for j = 1, 3 do for i = 1, 2 do want[#want + 1] = X[i][j][k] end end end
  t.eq(t.flat(tr:reshape(24):tolist()), want, "reshape of a transposed tensor copies")
end)

t.case("transpose, t and permute", function()
  local tr = x:transpose(1, 2)
  t.eq(tr:shape(), {2, 4, 3})
  for i = 1, 2 do for j = 1, 3 do for k = 1, 4 do
    t.eq(tr:get(i - 1, k - 1, j - 1), X[i][j][k])
  end end end
  local m, M = t.random_tensor(engine, {3, 5}, 4)
  local mt = m:t():tolist()
  for i = 1, 3 do for j = 1, 5 do t.eq(mt[j][i], M[i][j]) end end
  t.eq(engine.ones(3):t():shape(), {3})
  local p = x:permute(2, 0, 1)
  t.eq(p:shape(), {4, 2, 3})
  t.eq(x:permute({2, 0, 1}):shape(), {4, 2, 3})
  for i = 1, 2 do for j = 1, 3 do for k = 1, 4 do
    t.eq(p:get(k - 1, i - 1, j - 1), X[i][j][k])
  end end end
end)

t.case("narrow, slice and select", function()
  local n = x:narrow(2, 1, 2)
  t.eq(n:shape(), {2, 3, 2})
  for i = 1, 2 do for j = 1, 3 do for k = 1, 2 do t.eq(n:get(i - 1, j - 1, k - 1), X[i][j][k + 1]) end end end
  local s = x:slice(2, 0, 4, 2)
  t.eq(s:shape(), {2, 3, 2})
  for i = 1, 2 do for j = 1, 3 do
    t.eq(s:get(i - 1, j - 1, 0), X[i][j][1])
    t.eq(s:get(i - 1, j - 1, 1), X[i][j][3])
  end end
  t.eq(x:slice(1, 1):shape(), {2, 2, 4}, "stop defaults to the end")
  t.eq(x:slice(1, -2):shape(), {2, 2, 4}, "negative start counts from the end")
  local sel = x:select(1, 2)
  t.eq(sel:shape(), {2, 4})
  for i = 1, 2 do for k = 1, 4 do t.eq(sel:get(i - 1, k - 1), X[i][3][k]) end end
  t.eq(x:select(0, -1):tolist(), X[2])
end)

t.case("squeeze, unsqueeze and expand", function()
  local u = x:unsqueeze(1)
  t.eq(u:shape(), {2, 1, 3, 4})
  t.eq(x:unsqueeze(-1):shape(), {2, 3, 4, 1})
  t.eq(u:squeeze():shape(), {2, 3, 4})
  t.eq(u:squeeze(1):shape(), {2, 3, 4})
  t.eq(engine.zeros(1, 3, 1):squeeze():shape(), {3})
  local col = engine.tensor({{1}, {2}, {3}}, {dtype = "f64"})
  local e = col:expand(3, 4)
  t.eq(e:shape(), {3, 4})
  t.eq(e:tolist(), {{1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}})
  t.eq(e:stride()[2], 0)
  t.eq(col:expand(2, -1, 2):shape(), {2, 3, 2})
end)

t.case("split and chunk return Lua arrays of views", function()
  local parts = x:split(3, 2)
  t.eq(#parts, 2)
  t.eq(parts[1]:shape(), {2, 3, 3})
  t.eq(parts[2]:shape(), {2, 3, 1})
  for i = 1, 2 do for j = 1, 3 do t.eq(parts[2]:get(i - 1, j - 1, 0), X[i][j][4]) end end
  local ch = x:chunk(3, 1)
  t.eq(#ch, 3)
  for c = 1, 3 do t.eq(ch[c]:tolist()[1][1], X[1][c]) end
  t.eq(#engine.F.split(x, 1), 2)
  t.eq(#engine.F.chunk(engine.zeros(10), 3), 3)
end)

t.case("views share memory with their base", function()
  local base = engine.zeros({3, 4}, {dtype = "f64"})
  base:select(0, 1):fill_(5)
  base:t():select(0, 3):fill_(7) -- column 3
  local want = {{0, 0, 0, 7}, {5, 5, 5, 7}, {0, 0, 0, 7}}
  t.eq(base:tolist(), want)
  base:narrow(1, 0, 1):set(2, 0, -1)
  t.eq(base:get(2, 0), -1)
  local v = base:view(12)
  v:set(0, 9)
  t.eq(base:get(0, 0), 9)
end)
