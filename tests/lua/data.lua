-- engine.data: memory-mapped byte and token datasets, deterministic windows, errors; the
-- generator state used by checkpoints.
local t = require "spec"
local engine = require "engine"
local data = engine.data

local FIXTURE = debug.getinfo(1, "S").source:match("^@(.*)/lua/[^/]*$") .. "/data/design.txt"

local function read_all(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local function write_file(bytes)
  local path = os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end

local text = read_all(FIXTURE)

t.case("bytes: shapes, dtype, targets are inputs shifted by one", function()
  local ds = data.bytes(FIXTURE, {seq_len = 16, batch = 3, seed = 7})
  t.eq(ds:len(), #text)
  local x, y = ds:batch(0)
  t.eq(x:shape(), {3, 16})
  t.eq(y:shape(), {3, 16})
  t.eq(x:dtype(), "i64")
  t.eq(x:device(), "cpu")
  local xl, yl = x:tolist(), y:tolist()
  for b = 1, 3 do
    for i = 1, 15 do t.eq(yl[b][i], xl[b][i + 1]) end
  end
end)

t.case("bytes: every window is the file's bytes at its start, inside the file", function()
  local T = 32
  local ds = data.bytes(FIXTURE, {seq_len = T, batch = 8, seed = 3})
  local seen = {}
  for k = 0, 20 do
    local starts = ds:starts(k)
    local x, y = ds:batch(k)
    local xl, yl = x:tolist(), y:tolist()
    for b = 1, 8 do
      local s = starts[b]
      t.truthy(s >= 0 and s <= #text - (T + 1), "start " .. s .. " in bounds")
      seen[s] = true
      for i = 1, T do
        t.eq(xl[b][i], text:byte(s + i))
        t.eq(yl[b][i], text:byte(s + i + 1))
      end
    end
  end
  local distinct = 0
  for _ in pairs(seen) do distinct = distinct + 1 end
  t.truthy(distinct > 150, "168 windows give many distinct starts, got " .. distinct)
end)

t.case("bytes: batch k depends only on (seed, k)", function()
  local a = data.bytes(FIXTURE, {seq_len = 8, batch = 4, seed = 11})
  local b = data.bytes(FIXTURE, {seq_len = 8, batch = 4, seed = 11})
  local c = data.bytes(FIXTURE, {seq_len = 8, batch = 4, seed = 12})
  local a5 = a:batch(5):tolist()
  for k = 0, 4 do b:batch(k) end
  t.eq(b:batch(5):tolist(), a5, "same seed, other order")
  t.eq(a:batch(5):tolist(), a5, "asked twice")
  t.truthy(t.show(c:starts(5)) ~= t.show(a:starts(5)), "another seed gives other windows")
  t.truthy(t.show(a:starts(6)) ~= t.show(a:starts(5)), "another batch gives other windows")
  -- batch k of size B is windows kB .. kB + B - 1: batch 1 of size 4 = windows 4..7
  local f = engine.mapped_file(FIXTURE)
  t.eq(f:window_starts(11, 4, 4, 9), a:starts(1))
  -- several batches fetched at once are those batches
  local w = a:windows(3, 2)
  t.eq(w:shape(), {2, 4, 9})
  for i = 0, 1 do
    local x, y = a:split(w:select(0, i))
    local bx, by = a:batch(3 + i)
    t.eq(x:tolist(), bx:tolist())
    t.eq(y:tolist(), by:tolist())
  end
end)

t.case("tokens: u16 and u32 files decode little-endian", function()
  local u16 = {}
  for i = 0, 99 do u16[#u16 + 1] = string.char((i * 700) % 256, math.floor(i * 700 / 256) % 256) end
  local path = write_file(table.concat(u16))
  local ds = data.tokens(path, {dtype = "u16", seq_len = 5, batch = 2, seed = 1})
  t.eq(ds:len(), 100)
  local starts = ds:starts(0)
  local x = ds:batch(0):tolist()
  for b = 1, 2 do
    for i = 1, 5 do t.eq(x[b][i], (starts[b] + i - 1) * 700 % 65536) end
  end
  local f = engine.mapped_file(path, "u16")
  t.eq(f:read(98, 2):tolist(), {98 * 700 % 65536, 99 * 700 % 65536})
  f:close()
  t.raises(function() f:len() end, "closed")
  os.remove(path)

  local u32 = {}
  for i = 0, 9 do
    local v = 70000 * i + 3
    u32[#u32 + 1] = string.char(v % 256, math.floor(v / 256) % 256, math.floor(v / 65536) % 256, 0)
  end
  path = write_file(table.concat(u32))
  local g = engine.mapped_file(path, "u32")
  t.eq(g:read(0, 3):tolist(), {3, 70003, 140003})
  os.remove(path)
end)

t.case("errors: missing, empty, short and ragged files; bad options", function()
  t.raises(function() data.bytes("/nonexistent/file", {seq_len = 4, batch = 1}) end,
           "cannot open", "/nonexistent/file")
  local empty = write_file("")
  t.raises(function() data.bytes(empty, {seq_len = 4, batch = 1}) end, "is empty")
  os.remove(empty)
  local short = write_file("abc")
  t.raises(function() data.bytes(short, {seq_len = 4, batch = 1}) end, "3 tokens", "seq_len + 1 = 5")
  os.remove(short)
  local odd = write_file("abc")
  t.raises(function() data.tokens(odd, {dtype = "u16", seq_len = 1, batch = 1}) end,
           "not a whole number of 2-byte tokens")
  os.remove(odd)
  t.raises(function() data.bytes(FIXTURE, {seq_len = 0, batch = 1}) end, "seq_len")
  t.raises(function() data.bytes(FIXTURE, {seq_len = 4, batch = 1, sequence = 3}) end,
           "unknown option 'sequence'")
  t.raises(function() data.tokens(FIXTURE, {dtype = "u8", seq_len = 4, batch = 1}) end, "dtype")
  local f = engine.mapped_file(FIXTURE)
  t.raises(function() f:read(#text - 2, 5) end, "outside")
  t.raises(function() f:windows(0, 0, 1, #text + 1) end, "does not fit")
end)

t.case("rng_state / set_rng_state restore the random stream", function()
  engine.manual_seed(99)
  engine.randn{7}
  local st = engine.rng_state()
  t.eq(st.seed, 99)
  local a = engine.randn{5}:tolist()
  engine.randn{3}
  engine.set_rng_state(st)
  t.eq(engine.randn{5}:tolist(), a)
  t.raises(function() engine.set_rng_state{seed = -1, offset = 0} end, "set_rng_state")
end)
