-- The profiler's own cost per op, on the host: a loop of tiny ops timed without the profiler and
-- inside engine.profile (the op hook, the Lua line lookup, and on a GPU CUPTI's records), called
-- directly and from 4 frames deep in framework code (lua/engine/..., which the line lookup walks
-- past). Wall time (median of 7 loops) and process CPU time (least of 7); the difference over the
-- op count is the overhead per op.
--   engine run scripts/bench/profile_overhead.lua [n_ops]
local engine = require "engine"
local N = tonumber(arg and arg[1]) or 20000
local cuda = engine.device() == "cuda"

-- Framework code 4 frames deep, as a model's layers are: a chunk named like lua/engine's files,
-- whose innermost function issues the op.
local deep = assert(loadstring([[
  local function l4(x, y) return x + y end
  local function l3(x, y) return l4(x, y) end
  local function l2(x, y) return l3(x, y) end
  return function(x, y) return l2(x, y) end
]], "@lua/engine/bench_layers.lua"))()

local function loop(x, y, nested)
  if nested then
    for _ = 1, N do local _ = deep(x, y) end
  else
    for _ = 1, N do local _ = x + y end
  end
  if cuda and x:device():find("cuda") then engine.cuda.synchronize() end
end

local function median(v)
  table.sort(v)
  return v[(#v + 1) / 2]
end

local function min(v)
  table.sort(v)
  return v[1]
end

-- Per loop, plain and inside a profile (the loop only, not building the records): the median
-- wall time, and the least process CPU time (os.clock; steadier on a loaded machine, and it also
-- counts CUPTI's worker thread).
local function measure(x, y, nested, profile_cuda)
  local wall, cpu = {plain = {}, prof = {}}, {plain = {}, prof = {}}
  loop(x, y, nested)
  for r = 1, 7 do
    local t, c = engine.clock(), os.clock()
    loop(x, y, nested)
    wall.plain[r], cpu.plain[r] = engine.clock() - t, os.clock() - c
    engine.profile(function()
      local t0, c0 = engine.clock(), os.clock()
      loop(x, y, nested)
      wall.prof[r], cpu.prof[r] = engine.clock() - t0, os.clock() - c0
    end, {cuda = profile_cuda})
  end
  return median(wall.plain), median(wall.prof), min(cpu.plain), min(cpu.prof)
end

local cases = {
  {"cpu add, direct", "cpu", false, false},
  {"cpu add, 4 frames in lua/engine", "cpu", true, false},
}
if cuda then
  cases[#cases + 1] = {"cuda add, direct, CUPTI on", "cuda", false, true}
  cases[#cases + 1] = {"cuda add, 4 frames, CUPTI on", "cuda", true, true}
  cases[#cases + 1] = {"cuda add, direct, CUPTI off", "cuda", false, false}
end

print(string.format("%d ops per loop, 7 loops; us per op", N))
print(string.format("%-34s %10s %10s %9s %10s %10s %9s", "case", "wall", "profiled", "overhead",
                    "cpu", "profiled", "overhead"))
for _, c in ipairs(cases) do
  local label, device, nested, profile_cuda = c[1], c[2], c[3], c[4]
  local x = engine.randn({4}, {device = device})
  local y = engine.randn({4}, {device = device})
  local wp, wq, cp, cq = measure(x, y, nested, profile_cuda)
  local us = 1e6 / N
  print(string.format("%-34s %10.3f %10.3f %9.3f %10.3f %10.3f %9.3f", label, wp * us, wq * us,
                      (wq - wp) * us, cp * us, cq * us, (cq - cp) * us))
end

-- What stopping costs: turning N op records (and their kernels) into Lua tables.
local x, y = engine.randn({4}), engine.randn({4})
local t = engine.clock()
engine.profile(function() loop(x, y, false) end, {cuda = false})
print(string.format("profile of %d cpu ops, start to records: %.1f ms", N, (engine.clock() - t) * 1e3))
