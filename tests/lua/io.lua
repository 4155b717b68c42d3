-- engine.save / engine.load round trips (safetensors).
local t = require "spec"
local engine = require "engine"

local function tmpfile()
  local path = os.tmpname()
  os.remove(path)
  return path .. ".safetensors"
end

t.case("tensors and metadata come back as they were saved", function()
  local path = tmpfile()
  local w, W = t.random_tensor(engine, {3, 4}, 71, -1, 1, "f32")
  local tensors = {
    w = w,
    ids = engine.tensor({{1, -2}, {3, 2 ^ 40}}, {dtype = "i64"}),
    bias = engine.tensor({0.5, -1.25, 3}, {dtype = "f64"}),
    half = engine.tensor({1, 0.5, -2}, {dtype = "bf16"}),
    mask = engine.tensor({0, 1, 1}, {dtype = "u8"}),
    wt = w:t(), -- non-contiguous: written as contiguous data
    scalar = engine.tensor(7, {dtype = "i32"}),
  }
  engine.save(path, tensors, {step = "100", note = "round trip"})
  local got, meta = engine.load(path)
  os.remove(path)
  t.eq(meta, meta) -- a table
  t.eq(meta.step, "100")
  t.eq(meta.note, "round trip")
  local names = {}
  for k in pairs(got) do names[#names + 1] = k end
  table.sort(names)
  t.eq(names, {"bias", "half", "ids", "mask", "scalar", "w", "wt"})
  for name, x in pairs(tensors) do
    t.eq(got[name]:dtype(), x:dtype(), name)
    t.eq(got[name]:shape(), x:shape(), name)
    t.eq(got[name]:tolist(), x:tolist(), name)
    t.eq(got[name]:is_contiguous(), true, name)
  end
  t.near(got.w:tolist(), W, 1e-6, "f32 values")
end)

t.case("save without metadata; load gives an empty metadata table", function()
  local path = tmpfile()
  engine.save(path, {x = engine.arange(5)})
  local got, meta = engine.load(path)
  os.remove(path)
  t.eq(got.x:tolist(), {0, 1, 2, 3, 4})
  t.eq(next(meta), nil)
end)

t.case("a missing or corrupt file is an error naming load", function()
  t.raises(function() engine.load("/nonexistent/dir/x.safetensors") end, "load", "/nonexistent/dir/x.safetensors")
  local path = tmpfile()
  local f = assert(io.open(path, "wb"))
  f:write("\1\0\0\0\0\0\0\0{")
  f:close()
  t.raises(function() engine.load(path) end, "load")
  os.remove(path)
end)
