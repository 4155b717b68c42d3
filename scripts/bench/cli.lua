-- What the bench scripts share at their ends: the command line and the exit status.
--
--   local cli = dofile(script_dir .. "/cli.lua")
--   local opts = cli.parse("ops.lua", USAGE, {...}, {flags = {"quick"}, values = {"peer"}, lists = {"out"},
--                                                  numbers = {peak = {what = "TFLOP/s"}}})
--   ... cli.exit_on_failures("ops.lua", failures)
local cli = {}

-- Flags (true when given, else false), options that take a value, options that may repeat (a
-- list of their values), and options whose value is a number (numbers: name -> {what = its unit,
-- whole = true for an integer, least = its smallest}; opts holds the number); -h / --help prints
-- the usage and exits 0, an unknown argument, a missing value or a value that is not such a number
-- prints the usage to stderr and exits 2.
function cli.parse(name, usage, args, spec)
  local opts, kind = {}, {}
  for _, f in ipairs(spec.flags or {}) do
    kind["--" .. f], opts[f] = "flag", false
  end
  for _, v in ipairs(spec.values or {}) do kind["--" .. v] = "value" end
  for v in pairs(spec.numbers or {}) do kind["--" .. v] = "value" end
  for _, l in ipairs(spec.lists or {}) do
    kind["--" .. l], opts[l] = "list", {}
  end
  local function fail(...)
    io.stderr:write(name, ": ", ...)
    io.stderr:write("\n", usage, "\n")
    os.exit(2)
  end
  local i = 1
  while i <= #args do
    local a = args[i]
    local k, key = kind[a], type(a) == "string" and a:sub(3) or nil
    if a == "-h" or a == "--help" then
      print(usage)
      os.exit(0)
    elseif k == "flag" then
      opts[key] = true
    elseif k then
      local v = args[i + 1]
      if v == nil then fail(a, " needs a value") end
      if k == "list" then
        opts[key][#opts[key] + 1] = v
      else
        opts[key] = v
      end
      i = i + 1
    else
      fail("unknown argument '", tostring(a), "'")
    end
    i = i + 1
  end
  for key, rule in pairs(spec.numbers or {}) do
    local v = opts[key]
    if v ~= nil then
      local x = tonumber(v)
      if not x or rule.whole and x % 1 ~= 0 or rule.least and x < rule.least then
        fail("--", key, " needs ", rule.whole and "a whole number" or "a number",
             rule.least and (" >= " .. rule.least) or "", rule.what and (" (" .. rule.what .. ")") or "",
             ", not '", v, "'")
      end
      opts[key] = x
    end
  end
  return opts
end

-- The cases that failed (messages) to stderr and exit status 1; nothing when there are none.
function cli.exit_on_failures(name, failures)
  if #failures == 0 then return end
  io.stderr:write(string.format("%s: %d case(s) failed:\n", name, #failures))
  for _, f in ipairs(failures) do io.stderr:write("  ", (f:gsub("\n", "\n    ")), "\n") end
  os.exit(1)
end

return cli
