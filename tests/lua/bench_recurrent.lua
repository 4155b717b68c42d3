-- scripts/bench/recurrent.lua with a PyTorch peer's results (--peer), on the CPU's tiny rows
-- (--cpu: also where a GPU is present): the peer's times are found by case name and shown beside
-- ours with the ratio torch / ours; a case the peer lacks gets none, one it failed shows its
-- error; without a readable peer file there are no PyTorch columns.
local t = require "spec"

local SPEC = debug.getinfo(1, "S").source:gsub("^@", "")
local ROOT = SPEC:match("^(.*)/tests/lua/[^/]*$")
local SCRIPT = ROOT .. "/scripts/bench/recurrent.lua"
local json = dofile(ROOT .. "/scripts/bench/json.lua")

-- The script run as a chunk with these arguments: its rows and what it printed.
local function bench(...)
  local out, real_print, real_arg = {}, print, arg
  print = function(...)
    local parts = {}
    for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
    out[#out + 1] = table.concat(parts, "\t")
  end
  arg = {[0] = SCRIPT}
  local ok, rows = pcall(assert(loadfile(SCRIPT)), ...)
  print, arg = real_print, real_arg
  if not ok then error(rows, 0) end
  return rows, table.concat(out, "\n")
end

local function row(rows, name)
  for _, r in ipairs(rows) do if r.name == name then return r end end
  error("no row " .. name, 2)
end

local function line_of(text, name)
  for l in text:gmatch("[^\n]+") do
    if l:sub(1, #name) == name then return l end
  end
  error("no line for " .. name, 2)
end

local dir = t.tmpdir()
local peer = dir .. "/torch_recurrent.json"
json.write(peer, {meta = {device = "cpu", reps = 3, torch = "test"}, order = {},
                  cases = {["e1 tiny (cpu)"] = {fwd_us = 1234.5, bwd_us = 2469},
                           ["e23 tiny (cpu)"] = {fwd_us = json.null, error = "out of memory"}}})

t.case("the peer's times sit beside ours, with torch / ours", function()
  local rows, text = bench("--cpu", "--quick", "--only", "tiny", "--peer", peer)
  t.eq(#rows, 3, "the three tiny rows")
  local e1 = row(rows, "e1 tiny (cpu)")
  t.eq({e1.torch_fwd, e1.torch_bwd}, {1234.5, 2469}, "e1's peer times")
  t.truthy(e1.fwd > 0 and e1.bwd > 0, "our times")
  local l = line_of(text, "e1 tiny (cpu)")
  t.truthy(l:find(string.format(" %.2f ", 1234.5 / e1.fwd), 1, true), "fwd ratio in: " .. l)
  t.truthy(l:find(string.format(" %.2f ", 2469 / e1.bwd), 1, true), "bwd ratio in: " .. l)
  t.truthy(text:find("torch fwd", 1, true) and text:find("t/o bwd", 1, true), "the columns")
  t.eq(row(rows, "e88 tiny (cpu)").torch_fwd, nil, "a case the peer lacks")
  local e23 = row(rows, "e23 tiny (cpu)")
  t.truthy(e23.torch_fwd == nil and e23.torch_bwd == nil, "a case the peer failed")
  t.truthy(text:find("PyTorch failed: out of memory", 1, true), "its error is shown")
end)

t.case("no peer, or one that cannot be read: no PyTorch columns", function()
  for _, extra in ipairs({{}, {"--peer", dir .. "/missing.json"}}) do
    local rows, text = bench("--cpu", "--quick", "--only", "e1 tiny", unpack(extra))
    t.eq(#rows, 1, "one row")
    t.eq(rows[1].torch_fwd, nil, "no peer time")
    t.truthy(not text:find("torch fwd", 1, true), "no PyTorch columns")
  end
end)

t.case("--ckpt-every reaches every E88 and E23 call; without it each takes its default", function()
  local F, names, seen = engine.F, {"e88", "e88_forward", "e88_backward", "e23_forward", "e23_backward"}, {}
  local real = {}
  for _, n in ipairs(names) do
    real[n] = F[n]
    F[n] = function(...)
      for i = 1, select("#", ...) do
        local a = select(i, ...)
        if type(a) == "table" then seen[#seen + 1] = n .. "=" .. tostring(a.ckpt_every) end
      end
      return real[n](...)
    end
  end
  local ok, err = pcall(function()
    for _, every in ipairs({"nil", 4}) do  -- no option: every op gets nil, its own default
      seen = {}
      local extra = every == "nil" and {} or {"--ckpt-every", tostring(every)}
      local rows, text = bench("--cpu", "--quick", "--only", "tiny", unpack(extra))
      t.eq(#rows, 3, "the three tiny rows")
      local header = every == "nil" and "checkpoint at their ops' default intervals" or
                       "checkpoint every " .. every .. " steps"
      t.truthy(text:find(header, 1, true), "the header says " .. header)
      local called = {}
      for _, s in ipairs(seen) do
        local n, v = s:match("^(.-)=(.*)$")
        t.eq(v, tostring(every), n .. "'s ckpt_every")
        called[n] = true
      end
      for _, n in ipairs(names) do t.truthy(called[n], n .. " was called with options") end
    end
  end)
  for _, n in ipairs(names) do F[n] = real[n] end
  if not ok then error(err, 0) end
end)

t.rmdir(dir)
