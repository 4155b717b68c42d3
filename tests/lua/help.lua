-- help/doc, the module's identity under require, and the sharing of functions between tables.
local t = require "spec"
local engine = require "engine"

t.case("require gives the same table every time", function()
  t.eq(require "engine", engine)
  t.eq(require "engine", require "engine")
  t.eq(rawequal(_G.engine, engine), true, "the embedding's global is the module")
  t.eq(package.loaded.engine, engine)
end)

t.case("one function object behind method, engine.F and top-level names", function()
  local x = engine.ones(2)
  t.eq(rawequal(x.tanh, engine.F.tanh), true)
  t.eq(rawequal(x.add, engine.F.add), true)
  t.eq(rawequal(engine.cat, engine.F.cat), true)
  t.eq(rawequal(engine.matmul, engine.F.matmul), true)
  t.eq(rawequal(engine.where, engine.F.where), true)
  t.eq(rawequal(engine.Tensor.view, x.view), true)
end)

t.case("every function of engine, engine.F and the tensor methods is documented", function()
  for _, tbl in ipairs({engine, engine.F, engine.Tensor}) do
    for name, f in pairs(tbl) do
      if type(f) == "function" then
        local d = engine.help(f)
        t.truthy(d:find("\n\n", 1, true) and not d:find("^help:"), "doc of " .. name .. ": " .. d)
        t.truthy(d:find(name, 1, true), "the doc of " .. name .. " names it")
      end
    end
  end
end)

t.case("help of functions, names, modules and tensors", function()
  t.eq(engine.help(engine.F.tanh):match("^[^\n]*"), "x:tanh()  |  engine.F.tanh(x)")
  t.truthy(engine.help(engine.zeros):find("engine.zeros(shape[, opts])", 1, true), "zeros")
  t.truthy(engine.help("softmax"):find("x:softmax([dim])", 1, true), "by bare name")
  t.truthy(engine.help("engine.F.linear"):find("x @ W^T + b", 1, true), "by dotted name")
  t.truthy(engine.help("view"):find("x:view(shape)", 1, true), "a method by name")
  t.truthy(engine.help("nope"):find("no engine function or module named 'nope'", 1, true), "unknown name")
  t.truthy(engine.help(print):find("no documentation", 1, true), "undocumented function")
  local topics = engine.help()
  for _, want in ipairs({"engine:", "tensor methods:", "engine.F:", "zeros", "log_softmax", "cross_entropy"}) do
    t.truthy(topics:find(want, 1, true), "topics mention " .. want)
  end
  local fl = engine.help(engine.F)
  t.truthy(fl:find("engine.F.linear(x, W[, b][, opts])", 1, true), "engine.F listing")
  t.truthy(engine.help(engine.ones(1)):find("x:matmul(y)", 1, true), "a tensor lists its methods")
  t.truthy(engine.help(engine):find("engine.manual_seed(n)", 1, true), "the engine listing")
end)

t.case("engine.doc registers docs for Lua functions", function()
  local function double(x) return x * 2 end
  t.eq(engine.doc(double, "double(x)\n\nTwice x."), double, "doc returns f")
  t.eq(engine.help(double), "double(x)\n\nTwice x.")
  local mod = engine.doc({double = double}, "mymod\n\nA module.")
  local listing = engine.help(mod)
  t.truthy(listing:find("A module.", 1, true) and listing:find("  double(x)", 1, true), listing)
  t.raises(function() engine.doc(1, "x") end, "doc", "number")
  t.raises(function() engine.doc(double, 5) end, "doc", "string")
end)

t.case("allclose", function()
  local a = engine.tensor({1, 2, 3}, {dtype = "f64"})
  t.eq(engine.allclose(a, a + 1e-9), true)
  t.eq(engine.allclose(a, a + 1e-3), false)
  t.eq(a:allclose(a * (1 + 1e-3), {rtol = 1e-2}), true)
  t.eq(engine.allclose(a, engine.tensor({1, 0 / 0, 3}, {dtype = "f64"})), false, "NaN is never close")
  t.raises(function() engine.allclose(a, 1) end, "allclose", "argument 2")
end)
