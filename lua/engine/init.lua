-- The Lua half of the `engine` module. luaopen_engine builds the C functions into a table and runs
-- this file with that table as its argument; what is easier to say in Lua lives here: help and
-- doc, submodules loaded on first use (engine.nn -> require "engine.nn"), and small helpers.
local engine = ...
local docs = engine.docs -- weak-keyed: function or module table -> "signature\n\ndescription"

local function doc(f, text)
  local kind = type(f)
  if kind ~= "function" and kind ~= "table" then
    error("doc: argument 1 must be a function or table, got " .. kind, 2)
  end
  if type(text) ~= "string" then error("doc: argument 2 must be a string, got " .. type(text), 2) end
  docs[f] = text
  return f
end
engine.doc = doc
doc(doc, [[engine.doc(f, text) -> f

Registers the documentation of f (a function or module table) for engine.help. text is
"signature\n\ndescription"; the first line is what module listings show.]])

doc(engine, "engine\n\nTensors and kernels for Lua; `help()` lists the topics.")

-- ---- submodules: every embedded lua/engine/<name>.lua is engine.<name>, loaded on first use ----

local function submodule_names()
  local names = {}
  local preload = package and package.preload or {}
  for name in pairs(preload) do
    local sub = name:match("^engine%.([%w_]+)$")
    if sub then names[#names + 1] = sub end
  end
  table.sort(names)
  return names
end

setmetatable(engine, {
  __index = function(t, key)
    if type(key) == "string" and package and package.preload["engine." .. key] then
      local m = require("engine." .. key)
      rawset(t, key, m)
      return m
    end
  end,
})

-- ---- small helpers ----

local Tensor = engine.Tensor

local function is_tensor(x)
  local mt = type(x) == "userdata" and getmetatable(x)
  return mt and mt.__index == Tensor or false
end
engine.is_tensor = doc(is_tensor, "engine.is_tensor(x)\n\nWhether x is a tensor.")

local function allclose(a, b, opts)
  if not is_tensor(a) then error("allclose: argument 1 must be a tensor, got " .. type(a), 2) end
  if not is_tensor(b) then error("allclose: argument 2 must be a tensor, got " .. type(b), 2) end
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "rtol" and k ~= "atol" then
      error("allclose: unknown option '" .. tostring(k) .. "' (options: rtol, atol)", 2)
    end
  end
  local rtol, atol = opts.rtol or 1e-5, opts.atol or 1e-8
  local diff = (a - b):abs()
  -- le() is false for NaN, so a NaN anywhere makes the answer false
  return diff:le(b:abs() * rtol + atol):sum():item() == diff:numel()
end
engine.allclose = doc(allclose, [[engine.allclose(a, b[, {rtol = 1e-5, atol = 1e-8}])  |  a:allclose(b, ...)

Whether |a - b| <= atol + rtol * |b| everywhere (broadcasting; NaN is never close).]])
Tensor.allclose = allclose

-- ---- help ----

local function first_line(s) return (s:match("^[^\n]*")) end

local function wrap(prefix, words)
  if #words == 0 then return prefix .. "(none)" end
  local lines, line = {}, prefix
  for i, w in ipairs(words) do
    local piece = w .. (i < #words and "," or "")
    if line == prefix then
      line = line .. piece
    elseif #line + 1 + #piece > 96 then
      lines[#lines + 1] = line
      line = string.rep(" ", #prefix) .. piece
    else
      line = line .. " " .. piece
    end
  end
  lines[#lines + 1] = line
  return table.concat(lines, "\n")
end

local function sorted_keys(tbl, want)
  local keys = {}
  for k, v in pairs(tbl) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and (not want or type(v) == want) then
      keys[#keys + 1] = k
    end
  end
  table.sort(keys)
  return keys
end

local function listing(tbl)
  local lines = {docs[tbl] and docs[tbl] .. "\n" or tostring(tbl)}
  for _, k in ipairs(sorted_keys(tbl)) do
    local v = tbl[k]
    if docs[v] then
      lines[#lines + 1] = "  " .. first_line(docs[v])
    elseif type(v) == "function" then
      lines[#lines + 1] = "  " .. k .. "(...)"
    elseif type(v) == "table" then
      lines[#lines + 1] = "  " .. k .. " (table)"
    else
      lines[#lines + 1] = "  " .. k .. " = " .. tostring(v)
    end
  end
  if tbl == engine then
    lines[#lines + 1] = wrap("  modules loaded on first use: ", submodule_names())
  end
  return table.concat(lines, "\n")
end

local function topics()
  return table.concat({
    "engine " .. engine.version .. ": tensors and kernels for Lua.",
    "  help(f) or help(\"name\") shows one function: help(engine.zeros), help(x.view), help(\"softmax\").",
    "  help(engine), help(engine.F), help(engine.Tensor) (or help(x) for a tensor x) list a module.",
    wrap("  engine: ", sorted_keys(engine, "function")),
    wrap("  tensor methods: ", sorted_keys(Tensor, "function")),
    wrap("  engine.F: ", sorted_keys(engine.F, "function")),
    wrap("  modules: ", submodule_names()),
  }, "\n")
end

-- "engine.F.tanh", "F.tanh", "Tensor.view", "tanh", "view", "nn" -> the value, or nil.
local function resolve(name)
  local function walk(root, path)
    local v = root
    for part in path:gmatch("[^%.:]+") do
      if type(v) ~= "table" then return nil end
      v = v[part]
    end
    return v
  end
  local path = name:gsub("^engine%.?", "")
  if path == "" then return engine end
  return walk(engine, path) or walk(engine.F, path) or walk(Tensor, path)
end

local function help(x)
  if x == nil then return topics() end
  local what = x
  if type(x) == "string" then
    what = resolve(x)
    if what == nil then return "help: no engine function or module named '" .. x .. "'" end
  end
  if is_tensor(what) then what = Tensor end
  if type(what) == "table" then return listing(what) end
  if docs[what] then return docs[what] end
  return "help: no documentation for " .. tostring(what)
end
engine.help = doc(help, [[engine.help([f])

The documentation of f: a function (help(engine.zeros), help(x.view)), a name (help("softmax"),
help("engine.F.linear")), a module table (help(engine.F)) or a tensor (its methods). With no
argument, the list of topics. Returns the text (the REPL prints it).]])

return engine
