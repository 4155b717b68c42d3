-- A short tour of the GPU side (the README's snippet, checked): bf16 tensors on cuda, a norm,
-- the allocator's counters, a captured graph, event timing, and the result brought back.
-- Run: engine run examples/gpu_tour.lua   (on a machine with a GPU)
local engine = require "engine"
if engine.device() ~= "cuda" then
  error("gpu_tour.lua: no CUDA GPU here (engine.device() is " .. engine.device() .. ")")
end
engine.manual_seed(1)
local x = engine.randn({8192, 4096}, {dtype = "bf16", device = "cuda"})
local y = engine.F.rms_norm(x, engine.ones(4096, {dtype = "bf16", device = "cuda"}), 1e-6)
print("rms of a normalised row (expect ~1):", (y:narrow(0, 0, 1):to("f32") ^ 2):mean():sqrt():item())
print("peak allocated bytes:", engine.cuda.memory_stats().peak_allocated)

local g = engine.cuda.graph(function() y = (x * 2):silu() end) -- capture once ...
g:replay()                                                     -- ... replay cheaply
local want = (x * 2):silu()
print("graph replay equals eager:", engine.allclose(y:to("f32"), want:to("f32")))

local s, e = engine.cuda.Event(), engine.cuda.Event()
s:record(); y = x:softmax(-1); e:record(); e:synchronize()
print(("softmax over [8192,4096] bf16: %.3f ms"):format(s:elapsed(e)))
print("rows sum to 1 (total / rows):", y:cpu():to("f32"):sum():item() / 8192)
