-- scripts/bench/recurrent_accuracy.lua on the CPU's small rows (--cpu): a row per kernel, the f32
-- kernels within f32 arithmetic of the f64 reference, the bf16 ones at the floor that rounding the
-- reference to bf16 sets (the CPU kernels keep their state in f32); with --grad the backwards'
-- input gradients the same way (the bf16 ones within 2.5x that floor: they run on the forward's
-- bf16 outputs); and bad arguments refused.
local t = require "spec"

local SPEC = debug.getinfo(1, "S").source:gsub("^@", "")
local ROOT = SPEC:match("^(.*)/tests/lua/[^/]*$")
local SCRIPT = ROOT .. "/scripts/bench/recurrent_accuracy.lua"

local function run(...)
  local real_print, real_arg = print, arg
  print = function() end
  arg = {[0] = SCRIPT}
  local ok, rows = pcall(assert(loadfile(SCRIPT)), ...)
  print, arg = real_print, real_arg
  if not ok then error(rows, 0) end
  return rows
end

t.case("the CPU kernels' forward errors against f64", function()
  local rows = run("--cpu")
  t.eq(#rows, 3, "e88, e1, e23")
  for _, r in ipairs(rows) do
    t.truthy(r.f32 > 0 and r.f32 < 1e-6, r.name .. ": f32 error " .. r.f32)
    t.truthy(r.floor > 5e-4 and r.floor < 4e-3, r.name .. ": bf16 rounding " .. r.floor)
    t.truthy(r.bf16 >= 0.99 * r.floor and r.bf16 < 1.05 * r.floor,
             string.format("%s: bf16 error %.4e against its floor %.4e", r.name, r.bf16, r.floor))
  end
  local grads = run("--cpu", "--grad")
  t.eq(#grads, 3, "--grad: e88, e1, e23")
  for _, r in ipairs(grads) do
    t.truthy(r.out:sub(1, 1) == "d", r.name .. ": a gradient's row, " .. r.out)
    t.truthy(r.f32 > 0 and r.f32 < 1e-6, r.name .. ": f32 gradient error " .. r.f32)
    t.truthy(r.bf16 >= 0.99 * r.floor and r.bf16 < 2.5 * r.floor,
             string.format("%s: bf16 gradient error %.4e against its floor %.4e", r.name, r.bf16,
                           r.floor))
  end
  local only = run("--cpu", "--only", "e23")
  t.eq(#only, 1, "--only picks by name")
  t.eq(only[1].name, "e23 small (cpu)")
end)
