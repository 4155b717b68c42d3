-- The bench scripts' command lines: flags (true when given), options that take a value, and
-- options that may repeat (a list of their values); -h / --help prints the usage and exits 0, an
-- unknown argument or a missing value prints the usage to stderr and exits 2.
--
--   local parse = dofile(script_dir .. "/args.lua")
--   local opts = parse("ops.lua", USAGE, {...}, {flags = {"quick"}, values = {"peer"}, lists = {"out"}})
return function(name, usage, args, spec)
  local opts, kind = {}, {}
  for _, f in ipairs(spec.flags or {}) do kind["--" .. f] = "flag" end
  for _, v in ipairs(spec.values or {}) do kind["--" .. v] = "value" end
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
  return opts
end
