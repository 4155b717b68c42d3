-- Host time of one tiny op launched from Lua, with and without NVTX, against the same op on CPU
-- tensors (the generic binding + dispatch cost). Run: engine run scripts/bench/launch_overhead.lua
local engine = require "engine"
local x = engine.randn({1, 1}, {dtype = "bf16", device = "cuda"})
local y = engine.randn({1, 1}, {dtype = "bf16", device = "cuda"})
local function bench(label)
  for _ = 1, 2000 do local z = x + y end
  engine.cuda.synchronize()
  local n, t = 20000, engine.clock()
  for _ = 1, n do local z = x + y end
  local host = (engine.clock() - t) / n * 1e6
  engine.cuda.synchronize()
  print(("%-28s %.2f us/op host"):format(label, host))
end
bench("add, nvtx on")
engine.cuda.nvtx(false)
bench("add, nvtx off")
local xc, yc = x:cpu(), y:cpu()
local t = engine.clock()
for _ = 1, 20000 do local z = xc + yc end
print(("%-28s %.2f us/op host"):format("add on cpu tensors", (engine.clock() - t) / 20000 * 1e6))
