-- engine.cli: the command-line flags of the study and training scripts (scripts/*.lua).
--   local o = engine.cli.parse("train_lm", {data = "string", steps = "int", bf16 = "bool"}, arg)
-- Flags are --name value (or --name alone for "bool"); -h is --help. Kinds: "int" a positive
-- integer, "count" a non-negative integer, "number" a positive number, "amount" a non-negative
-- number, "string", "bool". A bad flag prints "prog: message (see --help)" and exits with 2.
-- Given `usage`, --help (or -h) prints it and parse returns nil: the script then just returns.
local cli = {}

function cli.fail(prog, msg)
  io.stderr:write(prog, ": ", msg, "\n(see --help)\n")
  os.exit(2)
end

local WHAT = {int = "a positive integer", count = "a non-negative integer", number = "a positive number",
              amount = "a non-negative number"}

local function value(prog, name, kind, v)
  if kind == "string" then return v end
  local n = tonumber(v)
  local whole = kind == "int" or kind == "count"
  local zero_ok = kind == "count" or kind == "amount"
  if not n or n ~= n or (whole and n ~= math.floor(n)) or n < 0 or (n == 0 and not zero_ok) then
    cli.fail(prog, ("--%s needs %s, got '%s'"):format(name, WHAT[kind], v))
  end
  return n
end

function cli.parse(prog, flags, args, usage)
  local o, i = {}, 1
  while i <= #args do
    local a = args[i] == "-h" and "--help" or args[i]
    local name = a:match("^%-%-([%w%-]+)$")
    local kind = name and (flags[name] or (usage and name == "help" and "bool"))
    if not kind then cli.fail(prog, "unknown argument '" .. a .. "'") end
    if kind == "bool" then
      o[name], i = true, i + 1
    else
      local v = args[i + 1]
      if v == nil then cli.fail(prog, "--" .. name .. " needs a value") end
      o[name], i = value(prog, name, kind, v), i + 2
    end
  end
  if usage and o.help then
    print(usage)
    return nil
  end
  return o
end

return cli
