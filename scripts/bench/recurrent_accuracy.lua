-- How far the recurrent kernels' forwards are from exact: E88, E1 and E23 on bf16 and f32 inputs,
-- each output against the f64 CPU reference on the same (bf16-representable) values, as a
-- relative L2 error ‖out − ref‖ / ‖ref‖, beside the bf16 rounding of the reference itself (the
-- least a bf16 output can show). A kernel whose bf16 error sits at that floor adds nothing
-- visible; the f32 column shows what the kernel's own arithmetic leaves.
--
--   engine run scripts/bench/recurrent_accuracy.lua [--cpu] [--only NAME]
--
-- On the GPU it runs the benchmark shapes at fewer steps (the f64 reference runs on the CPU);
-- without one, small shapes on the CPU kernels. Returns its rows when run as a chunk.
local engine = engine or require "engine"
local F = engine.F

local USAGE = [[
usage: engine run scripts/bench/recurrent_accuracy.lua [--cpu] [--only NAME]
  --cpu    the CPU kernels at small shapes even where a GPU is present
  --only   only the cases whose name contains NAME (plain substring)]]

local script_dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local cli = dofile(script_dir .. "/cli.lua")
local opts = cli.parse("recurrent_accuracy.lua", USAGE, {...}, {flags = {"cpu"}, values = {"only"}})

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

-- Each runner: its inputs as bf16 CPU tensors, and fn(inputs converted by `as`) -> main output.
local runners = {}
function runners.e88(c)
  local q, k = draw({c.B, c.T, c.H, c.n}, -1, 1), draw({c.B, c.T, c.H, c.n}, -1, 1)
  local v, g = draw({c.B, c.T, c.H, c.v}, -1, 1), draw({c.B, c.T, c.H, c.v}, -2, 2)
  local decay = draw({c.B, c.T, c.H}, 0.5, 1)
  return "y", function(as)
    return (F.e88(as(q), as(k), as(v), as(decay), as(g)))
  end
end
function runners.e1(c)
  local xw, z = draw({c.B, c.T, c.d}, -1, 1), draw({c.B, c.T, c.d}, -2, 2)
  local ws = 1.5 / math.sqrt(c.d)
  local W, b, h0 = draw({c.d, c.d}, -ws, ws), draw({c.d}, -0.5, 0.5), draw({c.B, c.d}, -0.9, 0.9)
  return "hs", function(as)
    local _, _, hs = F.e1_forward(as(xw), as(z), as(W), as(b), {state = as(h0)})
    return hs
  end
end
function runners.e23(c)
  local ws = 1.2 / math.sqrt(c.d)
  local xw, Wh, Ww = draw({c.B, c.T, c.d}, -1, 1), draw({c.d, c.d}, -ws, ws), draw({c.d, c.d}, -ws, ws)
  local b, h0, tape0 = draw({c.d}, -0.5, 0.5), draw({c.B, c.d}, -0.9, 0.9), draw({c.B, c.N, c.d}, -1, 1)
  return "hs", function(as)
    return (F.e23(as(xw), as(Wh), as(Ww), as(b), {state = as(h0), tape = as(tape0)}))
  end
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

engine.manual_seed(7)
print(string.format("forward error against the f64 CPU reference, on %s%s", dev,
                    on_gpu and " (" .. cuda.properties().name .. ")" or ""))
print(string.format("%-16s %-24s %-4s %12s %12s %14s", "case", "shape", "out", "bf16 err",
                    "f32 err", "bf16 rounding"))
local rows = {}
for _, c in ipairs(cases) do
  if (c.cpu or false) == not on_gpu and (not opts.only or c.name:find(opts.only, 1, true)) then
    local out, run = runners[c.kind](c)
    local ref = run(function(x) return x:to("f64") end)
    local r = {name = c.name, out = out}
    r.bf16 = rel(run(function(x) return x:to(dev) end), ref)
    r.f32 = rel(run(function(x) return x:to("f32"):to(dev) end), ref)
    r.floor = rel(ref:to("bf16"), ref)
    local shape = c.kind == "e88" and string.format("B%d T%d H%d n%d v%d", c.B, c.T, c.H, c.n, c.v)
      or string.format("B%d T%d d%d%s", c.B, c.T, c.d, c.N and (" N" .. c.N) or "")
    print(string.format("%-16s %-24s %-4s %12.3e %12.3e %14.3e", c.name, shape, out, r.bf16, r.f32,
                        r.floor))
    rows[#rows + 1] = r
  end
end
print("err = |out - ref| / |ref| (L2) against f64 on the CPU; bf16 rounding: the same for the " ..
      "reference rounded to bf16, the floor of a bf16 output")
return rows
