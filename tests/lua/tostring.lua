-- tostring of tensors: the header, the number formats, and bounded text for big tensors.
local t = require "spec"
local engine = require "engine"

t.case("small tensors print every value", function()
  t.eq(tostring(engine.tensor({{1, 2, 3}, {4, 5, 6}})),
       "tensor(f32, [2,3], cpu)\n[[1., 2., 3.],\n [4., 5., 6.]]")
  t.eq(tostring(engine.tensor({{1.5, -2, 3}, {4, 5, 6}})),
       "tensor(f32, [2,3], cpu)\n[[ 1.5000, -2.0000,  3.0000],\n [ 4.0000,  5.0000,  6.0000]]")
  t.eq(tostring(engine.tensor(2.5, {dtype = "f64"})), "tensor(f64, [], cpu)\n2.5000")
  t.eq(tostring(engine.tensor({1, -20, 3}, {dtype = "i64"})), "tensor(i64, [3], cpu)\n[  1, -20,   3]")
  t.eq(tostring(engine.zeros(0, 3)), "tensor(f32, [0,3], cpu)\n[]")
  t.eq(tostring(engine.tensor({0 / 0, 1 / 0, -1 / 0, 1})), "tensor(f32, [4], cpu)\n[ nan,  inf, -inf,   1.]")
  t.eq(tostring(engine.tensor({1e6, 2e-7, 3}, {dtype = "f64"})),
       "tensor(f64, [3], cpu)\n[1.0000e+06, 2.0000e-07, 3.0000e+00]")
  t.eq(tostring(engine.zeros(2, 1, 2, {dtype = "u8"})), "tensor(u8, [2,1,2], cpu)\n[[[0, 0]],\n\n [[0, 0]]]")
end)

t.case("big tensors print a bounded summary with edge values", function()
  local n = 1000000
  local s = tostring(engine.arange(n))
  t.truthy(#s < 2048, "1e6 elements: " .. #s .. " bytes")
  t.truthy(s:find("tensor(f32, [1000000], cpu)", 1, true), "header")
  t.truthy(s:find("...", 1, true), "elision mark")
  t.truthy(s:find("999999.", 1, true) and s:find(" 0.,", 1, true), "first and last values")
  local m = engine.randn(1000, 1000)
  local ms = tostring(m)
  t.truthy(#ms < 2048, "1000x1000: " .. #ms .. " bytes")
  local first = string.format("%.4f", m:get(0, 0))
  local last = string.format("%.4f", m:get(999, 999))
  t.truthy(ms:find(first, 1, true) and ms:find(last, 1, true), "corner values shown")
  local deep = tostring(engine.randn(4, 4, 4, 4, 4, 4, 4, 4))
  t.truthy(#deep <= 4096, "8-d: " .. #deep .. " bytes")
  t.truthy(deep:find("tensor(f32, [4,4,4,4,4,4,4,4], cpu)", 1, true), "8-d header")
  local strided = engine.arange(24):view(2, 3, 4):permute(2, 0, 1)
  t.truthy(tostring(strided):find("[[[ 0.,  4.,  8.],", 1, true), "views print their own layout")
end)
