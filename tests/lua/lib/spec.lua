-- A tiny spec harness for the Lua specs in tests/lua/*.lua (run by tests/test_lua_specs.c, one
-- fresh engine per file). A spec calls case(name, fn) for each case; assertions raise with the
-- caller's line; finish() (called by the runner after the file) raises listing every failed case.
local M = {}
local failures, ran = {}, 0

function M.case(name, fn)
  ran = ran + 1
  local ok, err = xpcall(fn, function(e) return debug.traceback(tostring(e), 2) end)
  if not ok then failures[#failures + 1] = "case '" .. name .. "' failed: " .. err end
end

function M.finish()
  if ran == 0 then error("no cases ran", 0) end
  if #failures > 0 then
    error(#failures .. " of " .. ran .. " cases failed:\n" .. table.concat(failures, "\n\n"), 0)
  end
  return ran
end

local function show(v)
  if type(v) ~= "table" then return tostring(v) end
  local parts = {}
  for i = 1, math.min(#v, 8) do parts[i] = show(v[i]) end
  if #v > 8 then parts[#parts + 1] = "...(" .. #v .. ")" end
  return "{" .. table.concat(parts, ", ") .. "}"
end
M.show = show

local function fail(msg, what) error((what and what .. ": " or "") .. msg, 3) end

-- Deep equality of numbers, strings, booleans and (nested) arrays.
local function same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  if #a ~= #b then return false end
  for i = 1, #a do
    if not same(a[i], b[i]) then return false end
  end
  return true
end

function M.eq(got, want, what)
  if not same(got, want) then fail("expected " .. show(want) .. ", got " .. show(got), what) end
end

function M.truthy(v, what)
  if not v then fail("expected a true value, got " .. tostring(v), what) end
end

-- Flattens nested arrays (tolist() output) into one array of numbers.
local function flat(v, out)
  out = out or {}
  if type(v) ~= "table" then
    out[#out + 1] = v
  else
    for i = 1, #v do flat(v[i], out) end
  end
  return out
end
M.flat = flat

-- f applied to every number of a nested array (tolist() output), keeping its structure.
function M.map(list, f)
  local out = {}
  for i, v in ipairs(list) do out[i] = type(v) == "table" and M.map(v, f) or f(v) end
  return out
end

-- f(a_i, b_i) over two nested arrays of the same structure.
function M.zip(a, b, f)
  local out = {}
  for i = 1, #a do out[i] = type(a[i]) == "table" and M.zip(a[i], b[i], f) or f(a[i], b[i]) end
  return out
end

-- got and want: numbers or nested arrays of the same structure; |got - want| <= tol * max(1, |want|).
function M.near(got, want, tol, what)
  local g, w = flat(got), flat(want)
  if #g ~= #w then fail("expected " .. #w .. " values, got " .. #g, what) end
  for i = 1, #w do
    local err = math.abs(g[i] - w[i])
    if not (err <= tol * math.max(1, math.abs(w[i]))) then
      fail(("value %d: expected %.9g, got %.9g (tolerance %g)"):format(i, w[i], g[i], tol), what)
    end
  end
end

-- fn must raise an error whose message contains every needle (plain text).
function M.raises(fn, ...)
  local ok, err = pcall(fn)
  if ok then fail("expected an error, but the call succeeded") end
  err = tostring(err)
  for _, needle in ipairs({...}) do
    if not err:find(needle, 1, true) then fail("error '" .. err .. "' lacks '" .. needle .. "'") end
  end
  return err
end

-- Random values from a generator independent of the engine's (a 64-bit-free LCG on doubles).
function M.random_values(n, seed, lo, hi)
  local s = seed % 2147483647
  if s <= 0 then s = s + 2147483646 end
  local v = {}
  for i = 1, n do
    s = (s * 16807) % 2147483647
    v[i] = lo + (hi - lo) * (s / 2147483647)
  end
  return v
end

-- A nested array of the given shape filled from flat values (row-major).
function M.nest(values, shape)
  local pos = 0
  local function build(d)
    local t = {}
    for i = 1, shape[d] do
      if d == #shape then
        pos = pos + 1
        t[i] = values[pos]
      else
        t[i] = build(d + 1)
      end
    end
    return t
  end
  if #shape == 0 then return values[1] end
  return build(1)
end

-- A fresh empty directory (a path under the system's temporary directory), and its removal.
function M.tmpdir()
  local path = os.tmpname()
  os.remove(path)
  assert(os.execute("mkdir -p " .. path))
  return path
end

function M.rmdir(path) os.execute("rm -rf '" .. path .. "'") end

-- A random f64 tensor and its values as nested Lua arrays.
function M.random_tensor(engine, shape, seed, lo, hi, dtype)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local list = M.nest(M.random_values(n, seed, lo or -2, hi or 2), shape)
  return engine.tensor(list, {dtype = dtype or "f64"}), list
end

return M
