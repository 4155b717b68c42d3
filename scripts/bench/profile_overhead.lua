-- The profiler's own cost per op, on the host: a loop of tiny ops timed without the profiler and
-- inside engine.profile (the op hook, the Lua line lookup, and on a GPU CUPTI's records), called
-- directly and from 4 frames deep in framework code (lua/engine/..., which the line lookup walks
-- past). The median of 7 runs each; the difference over the op count is the overhead per op.
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

-- Seconds per loop: plain, and inside a profile (the loop only, not building the records).
local function measure(x, y, nested, profile_cuda)
  local plain, profiled = {}, {}
  loop(x, y, nested)
  for r = 1, 7 do
    local t = engine.clock()
    loop(x, y, nested)
    plain[r] = engine.clock() - t
    local inside
    engine.profile(function()
      local t0 = engine.clock()
      loop(x, y, nested)
      inside = engine.clock() - t0
    end, {cuda = profile_cuda})
    profiled[r] = inside
  end
  return median(plain), median(profiled)
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

print(string.format("%d ops per loop, median of 7 loops", N))
print(string.format("%-34s %12s %12s %12s %8s", "case", "plain us/op", "prof us/op", "overhead us",
                    "ratio"))
for _, c in ipairs(cases) do
  local label, device, nested, profile_cuda = c[1], c[2], c[3], c[4]
  local x = engine.randn({4}, {device = device})
  local y = engine.randn({4}, {device = device})
  local plain, prof = measure(x, y, nested, profile_cuda)
  print(string.format("%-34s %12.3f %12.3f %12.3f %8.2f", label, plain / N * 1e6, prof / N * 1e6,
                      (prof - plain) / N * 1e6, prof / plain))
end

-- What stopping costs: turning N op records (and their kernels) into Lua tables.
local x, y = engine.randn({4}), engine.randn({4})
local t = engine.clock()
engine.profile(function() loop(x, y, false) end, {cuda = false})
print(string.format("profile of %d cpu ops, start to records: %.1f ms", N, (engine.clock() - t) * 1e3))
