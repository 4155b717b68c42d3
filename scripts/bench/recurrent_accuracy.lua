-- How far the recurrent kernels' forwards are from exact: E88, E1 and E23 on bf16 and f32 inputs,
-- each output against the f64 CPU reference on the same (bf16-representable) values, as a
-- relative L2 error ‖out − ref‖ / ‖ref‖, beside the bf16 rounding of the reference itself (the
-- least a bf16 output can show). A kernel whose bf16 error sits at that floor adds nothing
-- visible; the f32 column shows what the kernel's own arithmetic leaves. With --grad, the
-- backwards the same way: every input's gradient of sum(out * dy) (dy drawn like the inputs,
-- autograd through the ops), the row showing the input whose bf16 gradient is furthest off.
--
--   engine run scripts/bench/recurrent_accuracy.lua [--cpu] [--grad] [--only NAME]
--
-- On the GPU it runs the benchmark shapes at fewer steps (the f64 reference runs on the CPU);
-- without one, small shapes on the CPU kernels. Returns its rows when run as a chunk.
local engine = engine or require "engine"
local F = engine.F

local USAGE = [[
usage: engine run scripts/bench/recurrent_accuracy.lua [--cpu] [--grad] [--only NAME]
  --cpu    the CPU kernels at small shapes even where a GPU is present
  --grad   the input gradients (the backward kernels) instead of the forward's output
  --only   only the cases whose name contains NAME (plain substring)]]

local script_dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local cli = dofile(script_dir .. "/cli.lua")
local opts = cli.parse("recurrent_accuracy.lua", USAGE, {...}, {flags = {"cpu", "grad"}, values = {"only"}})

local cuda = engine.cuda
local on_gpu = not opts.cpu and cuda and cuda.is_available and cuda.is_available()
local dev = on_gpu and "cuda" or "cpu"

-- ‖a − ref‖ / ‖ref‖, a on any device and dtype, ref f64 on the CPU.
local function rel(a, ref)
  local d = a:to("cpu"):to("f64") - ref
  return math.sqrt((d * d):sum():item() / (ref * ref):sum():item())
end

-- Inputs drawn in bf16 on the CPU, so that bf16, f32 and f64 runs see the same values.
local function draw(shape, lo, hi)
  return (engine.rand(shape, {dtype = "f32"}) * (hi - lo) + lo):to("bf16")
end

-- Each runner: its main output's name, fn(inputs converted by `as`, grad) -> that output (or
-- with grad one that autograd differentiates; its inputs drawn as bf16 CPU tensors, each passed
-- through `as` once, in the order of the third value: the inputs' names).
local runners = {}
function runners.e88(c)
  local q, k = draw({c.B, c.T, c.H, c.n}, -1, 1), draw({c.B, c.T, c.H, c.n}, -1, 1)
  local v, g = draw({c.B, c.T, c.H, c.v}, -1, 1), draw({c.B, c.T, c.H, c.v}, -2, 2)
  local decay = draw({c.B, c.T, c.H}, 0.5, 1)
  return "y", function(as)
    return (F.e88(as(q), as(k), as(v), as(decay), as(g)))
  end, {"q", "k", "v", "decay", "g"}
end
function runners.e1(c)
  local xw, z = draw({c.B, c.T, c.d}, -1, 1), draw({c.B, c.T, c.d}, -2, 2)
  local ws = 1.5 / math.sqrt(c.d)
  local W, b, h0 = draw({c.d, c.d}, -ws, ws), draw({c.d}, -0.5, 0.5), draw({c.B, c.d}, -0.9, 0.9)
  return "hs", function(as, grad)  -- the gradients through y (F.e1_forward's hs takes none)
    if grad then return (F.e1(as(xw), as(z), as(W), as(b), {state = as(h0)})) end
    local _, _, hs = F.e1_forward(as(xw), as(z), as(W), as(b), {state = as(h0)})
    return hs
  end, {"xw", "z", "W", "b", "h0"}
end
function runners.e23(c)
  local ws = 1.2 / math.sqrt(c.d)
  local xw, Wh, Ww = draw({c.B, c.T, c.d}, -1, 1), draw({c.d, c.d}, -ws, ws), draw({c.d, c.d}, -ws, ws)
  local b, h0, tape0 = draw({c.d}, -0.5, 0.5), draw({c.B, c.d}, -0.9, 0.9), draw({c.B, c.N, c.d}, -1, 1)
  return "hs", function(as)
    return (F.e23(as(xw), as(Wh), as(Ww), as(b), {state = as(h0), tape = as(tape0)}))
  end, {"xw", "W_h", "W_write", "b", "h0", "tape0"}
end

local cases = {
  {name = "e88 layer", kind = "e88", B = 8, T = 64, H = 83, n = 32, v = 32},
  {name = "e1 B4 d512", kind = "e1", B = 4, T = 256, d = 512},
  {name = "e1 B4 d768", kind = "e1", B = 4, T = 256, d = 768},
  {name = "e1 B64 d512", kind = "e1", B = 64, T = 64, d = 512},
  {name = "e1 B64 d768", kind = "e1", B = 64, T = 64, d = 768},
  {name = "e23 B4 N8", kind = "e23", B = 4, T = 128, N = 8, d = 512},
  {name = "e23 B4 N64", kind = "e23", B = 4, T = 64, N = 64, d = 512},
  {name = "e23 B64 N8", kind = "e23", B = 64, T = 32, N = 8, d = 512},
  {name = "e23 B64 N64", kind = "e23", B = 64, T = 32, N = 64, d = 512},
  {name = "e88 small (cpu)", kind = "e88", B = 2, T = 24, H = 3, n = 16, v = 16, cpu = true},
  {name = "e1 small (cpu)", kind = "e1", B = 3, T = 24, d = 64, cpu = true},
  {name = "e23 small (cpu)", kind = "e23", B = 3, T = 24, N = 8, d = 64, cpu = true},
}

-- The input gradients of sum(out * dy) with the inputs converted by `conv` (autograd leaves);
-- dy = dys[1], drawn like the inputs at the first call (out's shape).
local function grads(run, conv, dys)
  local leaves = {}
  local out = run(function(x)
    leaves[#leaves + 1] = conv(x):detach():requires_grad(true)
    return leaves[#leaves]
  end, true)
  dys[1] = dys[1] or draw(out:shape(), -1, 1)
  ;(out * conv(dys[1])):sum():backward()
  local g = {}
  for i, l in ipairs(leaves) do g[i] = l:grad() end
  return g
end

-- A case's row: the forward's output, or (--grad) the input whose bf16 gradient is furthest off;
-- its errors and floor.
local function measure(c)
  local out, run, names = runners[c.kind](c)
  local f64 = function(x) return x:to("f64") end
  local bf16 = function(x) return x:to(dev) end
  local f32 = function(x) return x:to("f32"):to(dev) end
  if not opts.grad then
    local ref = run(f64)
    return {name = c.name, out = out, bf16 = rel(run(bf16), ref), f32 = rel(run(f32), ref),
            floor = rel(ref:to("bf16"), ref)}
  end
  local dys = {}
  local gref, g16, g32 = grads(run, f64, dys), grads(run, bf16, dys), grads(run, f32, dys)
  local r
  for i, name in ipairs(names) do
    local e = rel(g16[i], gref[i])
    if not r or e > r.bf16 then
      r = {name = c.name, out = "d" .. name, bf16 = e, f32 = rel(g32[i], gref[i]),
           floor = rel(gref[i]:to("bf16"), gref[i])}
    end
  end
  return r
end

engine.manual_seed(7)
print(string.format("%s error against the f64 CPU reference, on %s%s",
                    opts.grad and "gradient" or "forward", dev,
                    on_gpu and " (" .. cuda.properties().name .. ")" or ""))
print(string.format("%-16s %-24s %-8s %12s %12s %14s", "case", "shape", "out", "bf16 err",
                    "f32 err", "bf16 rounding"))
local rows = {}
for _, c in ipairs(cases) do
  if (c.cpu or false) == not on_gpu and (not opts.only or c.name:find(opts.only, 1, true)) then
    local r = measure(c)
    local shape = c.kind == "e88" and string.format("B%d T%d H%d n%d v%d", c.B, c.T, c.H, c.n, c.v)
      or string.format("B%d T%d d%d%s", c.B, c.T, c.d, c.N and (" N" .. c.N) or "")
    print(string.format("%-16s %-24s %-8s %12.3e %12.3e %14.3e", c.name, shape, r.out, r.bf16,
                        r.f32, r.floor))
    rows[#rows + 1] = r
  end
end
print("err = |out - ref| / |ref| (L2) against f64 on the CPU; bf16 rounding: the same for the " ..
      "reference rounded to bf16, the floor of a bf16 output" ..
      (opts.grad and "; out: the input whose bf16 gradient is furthest off" or ""))
return rows
