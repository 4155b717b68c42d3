-- engine.profile: kernel-level profiles of a Lua function, and the reports built from them.
--
--   local prof = engine.profile(function(p) for i = 1, 5 do step() end end, {warmup = 1})
--   print(prof:table{group = {GEMM = "gemm|cublas|cutlass", ["E88 fwd"] = "e88.*fwd"}})
--   print(prof:kernels{top = 15}); print(prof:ops()); print(prof:lines()); print(prof:memory())
--   prof:save_trace("trace.json")          -- Chrome trace JSON; Perfetto opens it
--   local s = prof:summary()                -- the same numbers as Lua tables
--
-- The recorder (engine/src/profile) keeps every op's CPU span, and on CUDA every kernel, memcpy
-- and memset from CUPTI, each linked to the op that launched it and that op to the Lua line that
-- issued it. Times here are in ns relative to the start of the profile; tables print ms.
local engine = require "engine"

local M = {}
local Profile = {}
Profile.__index = Profile

local function check_opts(opts, fname, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(fname .. ": options must be a table, got " .. type(opts), 3) end
  for k in pairs(opts) do
    if not allowed[k] then
      local names = {}
      for n in pairs(allowed) do names[#names + 1] = n end
      table.sort(names)
      error(fname .. ": unknown option '" .. tostring(k) .. "' (options: " ..
            table.concat(names, ", ") .. ")", 3)
    end
  end
  return opts
end

-- ---- building a profile from the recorder's records ----

-- Links kernels/copies to their ops, and computes each op's self time (its span less the spans of
-- the ops dispatched inside it) and GPU time (its kernels and copies).
local function new_profile(records)
  local self = setmetatable({records = records}, Profile)
  local ops = records.ops
  for _, o in ipairs(ops) do
    o.dur = o.t1 - o.t0
    o.self = o.dur
    o.gpu = 0
    o.n_kernels = 0
  end
  for _, o in ipairs(ops) do
    local parent = o.parent > 0 and ops[o.parent]
    if parent then parent.self = parent.self - o.dur end
  end
  local api_of = {}
  for _, a in ipairs(records.apis or {}) do api_of[a.correlation] = api_of[a.correlation] or a end
  self.api_of = api_of
  for _, list in ipairs {records.kernels or {}, records.copies or {}} do
    for _, k in ipairs(list) do
      k.dur = k.t1 - k.t0
      local o = k.op > 0 and ops[k.op]
      if o then
        o.gpu = o.gpu + k.dur
        o.n_kernels = o.n_kernels + 1
        k.op_name, k.line, k.frame, k.phase = o.name, o.line, o.frame, o.phase
      end
    end
  end
  self.has_gpu = #(records.kernels or {}) + #(records.copies or {}) > 0
  return self
end

-- engine.profile.from_records(records): a profile from records of the shape engine._profile_stop
-- returns (tests build synthetic GPU profiles with it).
M.from_records = new_profile

local function run(fn, opts)
  if type(fn) ~= "function" then
    error("profile: argument 1 must be a function, got " .. type(fn), 3)
  end
  opts = check_opts(opts, "profile", {warmup = true, cuda = true, phases = true, first_phase = true})
  local cuda = opts.cuda
  if cuda == nil then cuda = engine._profile_cuda_available() end
  if cuda and not engine._profile_cuda_available() then
    error("profile: cuda = true, but GPU activity cannot be recorded here (no GPU or no CUPTI)", 3)
  end
  local control = {phase = function(_, name) engine.profile_phase(name) end}
  for _ = 1, opts.warmup or 0 do fn(control) end
  if cuda then engine.cuda.synchronize() end
  local start = {cuda = cuda, phases = opts.phases ~= false, first_phase = opts.first_phase or "forward"}
  local started, why = pcall(engine._profile_start, start)
  if not started and cuda and opts.cuda == nil and not engine._profile_running() then
    -- CUPTI refused (driver, permissions): an automatic choice falls back to CPU spans
    engine.log("profile: " .. tostring(why):gsub("^profile: ", "") ..
               "; recording CPU op spans only", "warn")
    start.cuda, cuda = false, false
    started, why = pcall(engine._profile_start, start)
  end
  if not started then error(why, 0) end
  local ok, err = xpcall(fn, debug.traceback, control)
  local synced, serr = true, nil
  if cuda then synced, serr = pcall(engine.cuda.synchronize) end
  local records = engine._profile_stop()
  if not ok then error(err, 0) end
  if not synced then error(serr, 0) end
  return new_profile(records)
end

setmetatable(M, {__call = function(_, fn, opts) return run(fn, opts) end})

-- ---- items: time per key (kernel name, op name, line, phase) ----

local KEYS = {kernel = true, op = true, line = true, frame = true, phase = true}

-- The time basis: "gpu" (kernel and copy time) when GPU records exist, else "cpu" (op self time).
function Profile:basis(time)
  if time == nil then return self.has_gpu and "gpu" or "cpu" end
  if time ~= "gpu" and time ~= "cpu" then
    error("profile: time must be \"gpu\" or \"cpu\", got " .. tostring(time), 3)
  end
  return time
end

-- {key = {key=, ns=, calls=}} and the list sorted by time (then key).
function Profile:items(by, time)
  by = by or (self.has_gpu and "kernel" or "op")
  if not KEYS[by] then
    error("profile: by must be kernel, op, line, frame or phase, got " .. tostring(by), 3)
  end
  time = self:basis(time)
  if time == "cpu" and by == "kernel" then by = "op" end -- CPU time belongs to ops
  local map, list = {}, {}
  local function add(key, ns, calls)
    local it = map[key]
    if not it then
      it = {key = key, ns = 0, calls = 0}
      map[key] = it
      list[#list + 1] = it
    end
    it.ns, it.calls = it.ns + ns, it.calls + calls
  end
  if time == "gpu" then
    local seen = {}
    for _, recs in ipairs {self.records.kernels or {}, self.records.copies or {}} do
      for _, k in ipairs(recs) do
        if by == "kernel" then
          add(k.kind and ("[" .. k.name .. "]") or k.name, k.dur, 1)
        else
          local key = k.op_name and ((by == "op" and k.op_name) or k[by] or "(no line)")
                      or "(outside ops)"
          -- calls: op invocations (each op counted once however many kernels it launched)
          local first = k.op == 0 or not seen[k.op]
          if k.op > 0 then seen[k.op] = true end
          add(key, k.dur, first and 1 or 0)
        end
      end
    end
  else
    for _, o in ipairs(self.records.ops) do
      local key = (by == "op" or by == "kernel") and o.name or o[by] or "(no line)"
      add(key, o.self, 1)
    end
  end
  table.sort(list, function(a, b)
    if a.ns ~= b.ns then return a.ns > b.ns end
    return a.key < b.key
  end)
  return map, list
end

-- ---- groups: name patterns ----

-- group: {Name = "pat|pat", ...} (tried in sorted name order) or {{"Name", "pat|pat"}, ...}
-- (tried in the given order). Each '|'-separated alternative is a Lua pattern, tried on the name
-- and on its lowercase form; the first group with a matching alternative takes the item.
local function compile_groups(group)
  if type(group) ~= "table" then
    error("profile: group must be a table of name = pattern, got " .. type(group), 4)
  end
  local list = {}
  if #group > 0 then
    for i, g in ipairs(group) do
      if type(g) ~= "table" or type(g[1]) ~= "string" or type(g[2]) ~= "string" then
        error("profile: group[" .. i .. "] must be {name, pattern}", 4)
      end
      list[#list + 1] = {name = g[1], pattern = g[2]}
    end
  else
    for name, pat in pairs(group) do
      if type(name) ~= "string" or type(pat) ~= "string" then
        error("profile: group entries must be name = pattern strings", 4)
      end
      list[#list + 1] = {name = name, pattern = pat}
    end
    table.sort(list, function(a, b) return a.name < b.name end)
  end
  for _, g in ipairs(list) do
    g.alts = {}
    for alt in (g.pattern .. "|"):gmatch("([^|]*)|") do
      if alt ~= "" then
        local ok, err = pcall(string.find, "", alt)
        if not ok then
          error("profile: group '" .. g.name .. "': bad pattern '" .. alt .. "': " .. err, 4)
        end
        g.alts[#g.alts + 1] = alt
      end
    end
    if #g.alts == 0 then error("profile: group '" .. g.name .. "' has an empty pattern", 4) end
  end
  return list
end

local function group_of(groups, key)
  local low = key:lower()
  for _, g in ipairs(groups) do
    for _, p in ipairs(g.alts) do
      if key:find(p) or low:find(p) then return g end
    end
  end
end

-- Rows (name, ns, calls) of a breakdown, an Other row and the total: groups when given (all shown,
-- also those that matched nothing), else one row per item; beyond `top` rows the rest goes to
-- Other. The rows and Other always add up to the total.
function Profile:rows(opts)
  local _, items = self:items(opts.by, opts.time)
  local total = 0
  for _, it in ipairs(items) do total = total + it.ns end
  local rows, other = {}, {name = "Other", ns = 0, calls = 0}
  if opts.group then
    local groups, by_name = compile_groups(opts.group), {}
    for _, g in ipairs(groups) do
      by_name[g.name] = {name = g.name, ns = 0, calls = 0, members = {}}
      rows[#rows + 1] = by_name[g.name]
    end
    for _, it in ipairs(items) do
      local g = group_of(groups, it.key)
      local row = g and by_name[g.name] or other
      row.ns, row.calls = row.ns + it.ns, row.calls + it.calls
      if row.members then row.members[#row.members + 1] = it.key end
    end
    table.sort(rows, function(a, b)
      if a.ns ~= b.ns then return a.ns > b.ns end
      return a.name < b.name
    end)
  else
    for _, it in ipairs(items) do rows[#rows + 1] = {name = it.key, ns = it.ns, calls = it.calls} end
  end
  local top = opts.top
  if top and #rows > top then
    for i = top + 1, #rows do
      other.ns, other.calls = other.ns + rows[i].ns, other.calls + rows[i].calls
      rows[i] = nil
    end
  end
  return rows, other, total
end

-- ---- text tables ----

-- A kernel's name as shown: without a leading "void " and its parameter list.
local function short_name(name)
  local s = name:gsub("^void ", "")
  if s:sub(-1) == ")" then
    local depth = 0
    for i = #s, 1, -1 do
      local c = s:sub(i, i)
      if c == ")" then
        depth = depth + 1
      elseif c == "(" then
        depth = depth - 1
        if depth == 0 then
          if i > 1 then s = s:sub(1, i - 1) end
          break
        end
      end
    end
  end
  return s
end
M.short_name = short_name

local function fit(s, width)
  if #s <= width then return s end
  return s:sub(1, width - 3) .. "..."
end

-- Aligned text: the first column left-aligned, the others right-aligned.
local function render(header, rows, title)
  local widths = {}
  for c, h in ipairs(header) do widths[c] = #h end
  for _, r in ipairs(rows) do
    for c, v in ipairs(r) do widths[c] = math.max(widths[c] or 0, #v) end
  end
  local function line(r)
    local parts = {}
    for c, v in ipairs(r) do
      local pad = string.rep(" ", widths[c] - #v)
      parts[c] = c == 1 and v .. pad or pad .. v
    end
    return (table.concat(parts, "  "):gsub("%s+$", ""))
  end
  local out = {}
  if title then out[#out + 1] = title end
  out[#out + 1] = line(header)
  local rule = {}
  for c = 1, #header do rule[c] = string.rep("-", widths[c]) end
  out[#out + 1] = line(rule)
  for _, r in ipairs(rows) do out[#out + 1] = r.rule and line(rule) or line(r) end
  return table.concat(out, "\n")
end

local function ms(ns) return string.format("%.3f", ns / 1e6) end
local function pct(ns, total) return total > 0 and string.format("%.1f%%", 100 * ns / total) or "-" end
local function us_per(ns, calls) return calls > 0 and string.format("%.2f", ns / 1e3 / calls) or "-" end

local function width_opt(opts) return opts.width or 64 end

-- prof:table{group =, by =, top =, time =, width =, title =} -> text
function Profile:table(opts)
  opts = check_opts(opts, "profile:table",
                    {group = true, by = true, top = true, time = true, width = true, title = true})
  local rows, other, total = self:rows(opts)
  local width = width_opt(opts)
  local basis = self:basis(opts.time)
  local by = opts.by or (self.has_gpu and "kernel" or "op")
  if basis == "cpu" and by == "kernel" then by = "op" end
  local out = {}
  for _, r in ipairs(rows) do
    local name = by == "kernel" and not opts.group and short_name(r.name) or r.name
    out[#out + 1] = {fit(name, width), ms(r.ns), pct(r.ns, total), tostring(r.calls),
                     us_per(r.ns, r.calls)}
  end
  out[#out + 1] = {"Other", ms(other.ns), pct(other.ns, total), tostring(other.calls),
                   us_per(other.ns, other.calls)}
  out[#out + 1] = {rule = true}
  local calls = other.calls
  for _, r in ipairs(rows) do calls = calls + r.calls end
  out[#out + 1] = {"Total", ms(total), pct(total, total), tostring(calls), us_per(total, calls)}
  local title = opts.title or string.format("%s time by %s (wall %.3f ms)",
                                            basis == "gpu" and "GPU" or "CPU", by,
                                            self.records.wall_ns / 1e6)
  return render({"component", "time (ms)", "% total", "calls", "us/call"}, out, title)
end

local function dims(t) return string.format("%d,%d,%d", t[1], t[2], t[3]) end

-- Per kernel name: time, calls, and the launch configuration and op of its last launch.
function Profile:kernel_rows()
  local map, list = {}, {}
  local total = 0
  for _, recs in ipairs {self.records.kernels or {}, self.records.copies or {}} do
    for _, k in ipairs(recs) do
      local key = k.kind and ("[" .. k.name .. "]") or k.name
      local r = map[key]
      if not r then
        r = {name = key, ns = 0, calls = 0, ops = {}, op_list = {}}
        map[key] = r
        list[#list + 1] = r
      end
      r.ns, r.calls = r.ns + k.dur, r.calls + 1
      total = total + k.dur
      if k.grid then
        r.grid, r.block, r.registers = k.grid, k.block, k.registers
        r.smem = k.static_smem + k.dynamic_smem
      end
      if k.bytes then r.bytes = (r.bytes or 0) + k.bytes end
      local op = k.op_name or "-"
      if not r.ops[op] then
        r.ops[op] = true
        r.op_list[#r.op_list + 1] = op
      end
    end
  end
  table.sort(list, function(a, b)
    if a.ns ~= b.ns then return a.ns > b.ns end
    return a.name < b.name
  end)
  return list, total
end

-- prof:kernels{top = 20, width = 90} -> text: per kernel (and memcpy/memset) name.
function Profile:kernels(opts)
  opts = check_opts(opts, "profile:kernels", {top = true, width = true})
  local list, total = self:kernel_rows()
  if #list == 0 then return "no GPU kernels were recorded (a CPU profile: see prof:ops())" end
  local out, width = {}, opts.width or 90
  for i, r in ipairs(list) do
    if opts.top and i > opts.top then break end
    out[#out + 1] = {fit(short_name(r.name), width), ms(r.ns), pct(r.ns, total), tostring(r.calls),
                     us_per(r.ns, r.calls), r.grid and dims(r.grid) or "-",
                     r.block and dims(r.block) or "-", r.registers and tostring(r.registers) or "-",
                     r.smem and tostring(r.smem) or "-", fit(table.concat(r.op_list, ","), 24)}
  end
  return render({"kernel", "time (ms)", "% gpu", "calls", "us/call", "grid", "block", "regs",
                 "smem (B)", "op"}, out,
                string.format("%d kernels and copies, %.3f ms of GPU time", #list, total / 1e6))
end

-- Per op name (or line): calls, CPU self time, GPU time, kernels launched.
function Profile:op_rows(key)
  local map, list = {}, {}
  for _, o in ipairs(self.records.ops) do
    local k = key == "op" and o.name or o[key] or "(no line)"
    local r = map[k]
    if not r then
      r = {name = k, calls = 0, cpu = 0, gpu = 0, kernels = 0, ops = {}, op_list = {}}
      map[k] = r
      list[#list + 1] = r
    end
    r.calls, r.cpu, r.gpu, r.kernels = r.calls + 1, r.cpu + o.self, r.gpu + o.gpu,
                                       r.kernels + o.n_kernels
    if not r.ops[o.name] then
      r.ops[o.name] = true
      r.op_list[#r.op_list + 1] = o.name
    end
  end
  local gpu = self.has_gpu
  table.sort(list, function(a, b)
    local x, y = gpu and a.gpu or a.cpu, gpu and b.gpu or b.cpu
    if x ~= y then return x > y end
    return a.name < b.name
  end)
  return list
end

local function op_table(self, key, opts, fname)
  opts = check_opts(opts, fname, {top = true, width = true})
  local list = self:op_rows(key)
  local cpu_total, gpu_total = 0, 0
  for _, r in ipairs(list) do cpu_total, gpu_total = cpu_total + r.cpu, gpu_total + r.gpu end
  local out, width = {}, width_opt(opts)
  for i, r in ipairs(list) do
    if opts.top and i > opts.top then break end
    local row = {fit(r.name, width), tostring(r.calls), ms(r.cpu), pct(r.cpu, cpu_total),
                 us_per(r.cpu, r.calls)}
    if self.has_gpu then
      row[#row + 1] = ms(r.gpu)
      row[#row + 1] = pct(r.gpu, gpu_total)
      row[#row + 1] = tostring(r.kernels)
    end
    if key ~= "op" then row[#row + 1] = fit(table.concat(r.op_list, ","), 40) end
    out[#out + 1] = row
  end
  local header = {key == "op" and "op" or "line", "calls", "cpu (ms)", "% cpu", "cpu us/call"}
  if self.has_gpu then
    header[#header + 1] = "gpu (ms)"
    header[#header + 1] = "% gpu"
    header[#header + 1] = "kernels"
  end
  if key ~= "op" then header[#header + 1] = "ops" end
  local title = string.format("%d ops; CPU %.3f ms%s", #self.records.ops, cpu_total / 1e6,
                              self.has_gpu and string.format(", GPU %.3f ms", gpu_total / 1e6) or "")
  return render(header, out, title)
end

-- prof:ops{top =} -> text: per op name (CPU self time, GPU time of its kernels).
function Profile:ops(opts) return op_table(self, "op", opts, "profile:ops") end

-- prof:lines{top =, frame = false} -> text: per issuing Lua line (frame = true: the innermost Lua
-- line, which may be inside the engine's own Lua code).
function Profile:lines(opts)
  local o = check_opts(opts, "profile:lines", {top = true, width = true, frame = true})
  local key = o.frame and "frame" or "line"
  return op_table(self, key, {top = o.top, width = o.width}, "profile:lines")
end

-- Per phase name (in first-seen order): time, occurrences and peak memory.
function Profile:phase_rows()
  local map, list = {}, {}
  for _, p in ipairs(self.records.phases or {}) do
    local r = map[p.name]
    if not r then
      r = {name = p.name, count = 0, ns = 0, peak_cpu = 0}
      map[p.name] = r
      list[#list + 1] = r
    end
    r.count, r.ns = r.count + 1, r.ns + (p.t1 - p.t0)
    r.peak_cpu = math.max(r.peak_cpu, p.peak_cpu)
    if p.peak_cuda then r.peak_cuda = math.max(r.peak_cuda or 0, p.peak_cuda) end
  end
  return list
end

local function mib(b) return b and string.format("%.1f", b / 1048576) or "n/a" end

-- prof:memory() -> text: peak memory per phase.
function Profile:memory()
  local out = {}
  for _, r in ipairs(self:phase_rows()) do
    out[#out + 1] = {r.name, tostring(r.count), ms(r.ns), mib(r.peak_cpu), mib(r.peak_cuda)}
  end
  return render({"phase", "times", "wall (ms)", "peak cpu (MiB)", "peak cuda (MiB)"}, out,
                "peak memory per phase (CPU: tensor bytes at op ends; CUDA: the allocator's peak)")
end

-- prof:summary{group =, by =, top =, time =} -> the data of the tables as Lua tables (ms).
function Profile:summary(opts)
  opts = check_opts(opts, "profile:summary", {group = true, by = true, top = true, time = true})
  local s = {ops = {}, kernels = {}, lines = {}, phases = {}, memory = {}}
  for _, r in ipairs(self:op_rows("op")) do
    s.ops[#s.ops + 1] = {name = r.name, calls = r.calls, cpu_ms = r.cpu / 1e6, gpu_ms = r.gpu / 1e6,
                         kernels = r.kernels}
  end
  for _, r in ipairs(self:op_rows("line")) do
    s.lines[#s.lines + 1] = {line = r.name, calls = r.calls, cpu_ms = r.cpu / 1e6,
                             gpu_ms = r.gpu / 1e6, ops = r.op_list}
  end
  local klist, gpu_total = self:kernel_rows()
  for _, r in ipairs(klist) do
    s.kernels[#s.kernels + 1] = {name = r.name, ms = r.ns / 1e6, calls = r.calls,
                                 us_per_call = r.ns / 1e3 / r.calls, grid = r.grid,
                                 block = r.block, registers = r.registers, smem = r.smem,
                                 bytes = r.bytes, ops = r.op_list}
  end
  local rows, other, total = self:rows(opts)
  s.groups = {}
  for _, r in ipairs(rows) do
    s.groups[#s.groups + 1] = {name = r.name, ms = r.ns / 1e6, calls = r.calls,
                               pct = total > 0 and 100 * r.ns / total or 0,
                               us_per_call = r.calls > 0 and r.ns / 1e3 / r.calls or 0,
                               members = r.members}
  end
  s.groups[#s.groups + 1] = {name = "Other", ms = other.ns / 1e6, calls = other.calls,
                             pct = total > 0 and 100 * other.ns / total or 0,
                             us_per_call = other.calls > 0 and other.ns / 1e3 / other.calls or 0}
  local cpu_total = 0
  for _, o in ipairs(self.records.ops) do cpu_total = cpu_total + o.self end
  s.totals = {wall_ms = self.records.wall_ns / 1e6, cpu_ms = cpu_total / 1e6,
              gpu_ms = gpu_total / 1e6, ops = #self.records.ops,
              kernels = #(self.records.kernels or {}), copies = #(self.records.copies or {}),
              basis = self:basis(opts.time), total_ms = total / 1e6,
              dropped = self.records.dropped or 0}
  for _, r in ipairs(self:phase_rows()) do
    local p = {name = r.name, count = r.count, ms = r.ns / 1e6, peak_cpu = r.peak_cpu,
               peak_cuda = r.peak_cuda}
    s.phases[#s.phases + 1] = p
    s.memory[r.name] = {peak_cpu = r.peak_cpu, peak_cuda = r.peak_cuda or "n/a"}
  end
  return s
end

-- ---- Chrome trace JSON ----

local function json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    if c == '"' then return '\\"' end
    if c == "\\" then return "\\\\" end
    if c == "\n" then return "\\n" end
    if c == "\t" then return "\\t" end
    return string.format("\\u%04x", c:byte())
  end) .. '"'
end
M.json_string = json_string

local function json_value(v)
  local t = type(v)
  if t == "string" then return json_string(v) end
  if t == "boolean" then return tostring(v) end
  if t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then return "null" end
    if v == math.floor(v) and math.abs(v) < 2^53 then return string.format("%d", v) end
    return string.format("%.17g", v)
  end
  if t == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    if #keys == #v then
      local parts = {}
      for i = 1, #v do parts[i] = json_value(v[i]) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = json_string(tostring(k)) .. ":" .. json_value(v[k]) end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  return "null"
end

local function us(ns) return string.format("%.3f", ns / 1e3) end

local CPU_PID, GPU_PID = 1, 100

-- One event; ts/dur are ns and written in us (the format's unit).
local function event(out, name, cat, ph, ts, dur, pid, tid, args, extra)
  local s = '{"name":' .. json_string(name) .. ',"cat":"' .. cat .. '","ph":"' .. ph ..
            '","ts":' .. us(ts) .. (dur and (',"dur":' .. us(dur)) or "") ..
            ',"pid":' .. pid .. ',"tid":' .. tid .. (extra or "") ..
            (args and (',"args":' .. json_value(args)) or "") .. "}"
  out[#out + 1] = s
end

local function meta(out, what, pid, tid, name, sort)
  out[#out + 1] = string.format('{"name":"%s","ph":"M","pid":%d,"tid":%d,"args":{"name":%s}}',
                                what, pid, tid, json_string(name))
  if sort then
    out[#out + 1] = string.format(
      '{"name":"%s_sort_index","ph":"M","pid":%d,"tid":%d,"args":{"sort_index":%d}}',
      what, pid, tid, sort)
  end
end

-- The trace events as a list of JSON texts.
function Profile:trace_events()
  local r, out = self.records, {}
  meta(out, "process_name", CPU_PID, 0, "CPU", 0)
  local threads = {}
  for _, o in ipairs(r.ops) do
    if not threads[o.thread] then
      threads[o.thread] = true
      meta(out, "thread_name", CPU_PID, o.thread, "thread " .. o.thread)
    end
    event(out, o.name, "op", "X", o.t0, o.dur, CPU_PID, o.thread,
          {seq = o.seq, inputs = o.inputs, line = o.line, frame = o.frame, phase = o.phase,
           backward = o.backward, parent = o.parent > 0 and o.parent or nil,
           device = o.device == "cuda" and ("cuda:" .. o.device_index) or "cpu"})
  end
  for _, a in ipairs(r.apis or {}) do
    if not a.driver then
      event(out, (a.name:gsub("_v%d+$", "")), "cuda_runtime", "X", a.t0, a.t1 - a.t0, CPU_PID,
            a.thread, {correlation = a.correlation, op = a.op > 0 and a.op or nil})
    end
  end
  local gpus, streams = {}, {}
  local flow = 0
  for _, recs in ipairs {r.kernels or {}, r.copies or {}} do
    for _, k in ipairs(recs) do
      local pid = GPU_PID + k.device
      if not gpus[pid] then
        gpus[pid] = true
        meta(out, "process_name", pid, 0, "GPU " .. k.device, 1 + k.device)
      end
      local skey = pid .. ":" .. k.stream
      if not streams[skey] then
        streams[skey] = true
        meta(out, "thread_name", pid, k.stream, "stream " .. k.stream)
      end
      local args = {correlation = k.correlation, op = k.op_name, op_seq = k.op > 0 and k.op or nil,
                    line = k.line, phase = k.phase}
      if k.grid then
        args.grid, args.block = dims(k.grid), dims(k.block)
        args.registers, args.static_smem, args.dynamic_smem = k.registers, k.static_smem,
                                                              k.dynamic_smem
      else
        args.bytes = k.bytes
      end
      event(out, k.name, k.kind or "kernel", "X", k.t0, k.dur, pid, k.stream, args)
      local o = k.op > 0 and r.ops[k.op]
      if o then
        -- an arrow from the launch (the runtime call inside the op, else the op's middle)
        flow = flow + 1
        local api = self.api_of[k.correlation]
        local ts = api and api.t0 >= o.t0 and api.t0 <= o.t1 and api.t0 or (o.t0 + o.t1) / 2
        event(out, "launch", "flow", "s", ts, nil, CPU_PID, o.thread, nil, ',"id":' .. flow)
        event(out, "launch", "flow", "f", k.t0, nil, pid, k.stream, nil,
              ',"id":' .. flow .. ',"bp":"e"')
      end
    end
  end
  return out
end

-- prof:save_trace(path): Chrome trace JSON (chrome://tracing, ui.perfetto.dev): CPU op spans
-- (pid "CPU", one row per thread), GPU kernels, memcpy and memset per stream (pid "GPU n"), and
-- flow arrows from each op to the kernels it launched.
function Profile:save_trace(path)
  if type(path) ~= "string" then error("profile:save_trace: argument 1 must be a path", 2) end
  local f, err = io.open(path, "w")
  if not f then error("profile:save_trace: " .. tostring(err), 2) end
  f:write('{"displayTimeUnit":"ms","otherData":{"generator":"engine.profile","wall_ms":',
          string.format("%.3f", self.records.wall_ns / 1e6), '},\n"traceEvents":[\n')
  f:write(table.concat(self:trace_events(), ",\n"))
  f:write("\n]}\n")
  f:close()
  return path
end

function Profile:__tostring()
  local s = self:summary()
  return string.format("profile: %d ops, %d kernels, wall %.3f ms, cpu %.3f ms, gpu %.3f ms",
                       s.totals.ops, s.totals.kernels, s.totals.wall_ms, s.totals.cpu_ms,
                       s.totals.gpu_ms)
end

M.Profile = Profile
engine.doc(M.from_records, [[engine.profile.from_records(records) -> prof

A profile from records shaped like prof.records (ops, kernels, copies, apis, phases, wall_ns):
to rebuild reports from saved records, or to test the reports on GPU-shaped data.]])

engine.doc(M, [[engine.profile(fn[, {warmup = 0, cuda = auto, phases = true}]) -> prof

Runs fn(p) under the profiler (after `warmup` unrecorded calls; the device is synchronized before
and after) and returns a profile. Every op's CPU span is recorded, and with cuda (default: when a
GPU is present) every GPU kernel, memcpy and memset through CUPTI, linked to the op that launched
it and that op to the Lua line that issued it. Phases: p:phase(name) or engine.profile_phase(name)
starts one ("forward" at first); autograd's backward pass is "backward" by itself (phases = false:
not split out).
  prof:table{group = {GEMM = "gemm|cublas"}, by = "kernel"|"op"|"line"|"frame"|"phase", top = N,
             time = "gpu"|"cpu"}   breakdown text: component, ms, % of total, calls, us/call, with
             Other and Total rows. A group pattern is '|'-separated Lua patterns, each tried on the
             name and its lowercase form; map groups are tried in name order, {{name, pat}, ...}
             in the given order.
  prof:kernels{top =}, prof:ops{top =}, prof:lines{top =, frame =}, prof:memory()   tables (text)
  prof:summary{group =, ...}   the same numbers as Lua tables
  prof:save_trace(path)        Chrome trace JSON (Perfetto)
  prof.records                 the raw records (ops, kernels, copies, apis, phases)]])

return M
