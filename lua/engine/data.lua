-- engine.data: language-model datasets over memory-mapped files (engine.mapped_file).
--
-- A dataset draws batch k as the random windows number kB .. kB + B - 1 of seq_len + 1 tokens
-- (Philox under the dataset's seed; see engine.mapped_file): batch k of seed s is always the same
-- windows, whatever came before, so a resumed run reads the same data at the same step.
local engine = require "engine"
local doc = engine.doc

local data = {}
doc(data, [[engine.data

data.bytes(path, {seq_len =, batch =[, seed = 0][, device =]}) and data.tokens(path, {dtype = "u16" |
"u32", ...}): datasets whose ds:batch(k) -> inputs [B, T], targets [B, T] (i64 on the device).]])

local Dataset = {}
Dataset.__index = Dataset

local function check_positive_int(v, name, fn)
  if type(v) ~= "number" or v < 1 or v ~= math.floor(v) then
    error(("data.%s: option %s must be a positive integer, got %s"):format(fn, name, tostring(v)), 4)
  end
end

local OPTIONS = {seq_len = true, batch = true, seed = true, device = true, dtype = true}

local function open(fn, path, opts, dtype)
  if type(path) ~= "string" then error("data." .. fn .. ": argument 1 must be a path", 3) end
  if type(opts) ~= "table" then error("data." .. fn .. ": argument 2 must be {seq_len =, batch =, ...}", 3) end
  for k in pairs(opts) do
    if not OPTIONS[k] then
      error(("data.%s: unknown option '%s' (seq_len, batch, seed, device%s)"):format(
        fn, tostring(k), fn == "tokens" and ", dtype" or ""), 3)
    end
  end
  check_positive_int(opts.seq_len, "seq_len", fn)
  check_positive_int(opts.batch, "batch", fn)
  local seed = opts.seed or 0
  if type(seed) ~= "number" or seed < 0 or seed ~= math.floor(seed) then
    error("data." .. fn .. ": option seed must be a non-negative integer, got " .. tostring(seed), 3)
  end
  local ok, file = pcall(engine.mapped_file, path, dtype)
  if not ok then error(file, 3) end
  if file:len() < opts.seq_len + 1 then
    error(("data.%s: '%s' has %d tokens, fewer than seq_len + 1 = %d"):format(
      fn, path, file:len(), opts.seq_len + 1), 3)
  end
  return setmetatable({file = file, path = path, seq_len = opts.seq_len, batch_size = opts.batch,
                       seed = seed, device = opts.device or "cpu", dtype = dtype}, Dataset)
end

function data.bytes(path, opts) return open("bytes", path, opts, "u8") end
doc(data.bytes, [[data.bytes(path, {seq_len =, batch =[, seed = 0][, device = "cpu"]}) -> ds

A byte-level dataset over any file (memory-mapped, read-only). ds:batch(k) -> inputs, targets:
i64 [batch, seq_len] on the device, from batch windows of seq_len + 1 bytes (targets are inputs
shifted by one). Batch k of a seed is always the same windows. ds:windows(k, n) -> batches k ..
k+n-1 as one [n, batch, seq_len + 1] tensor (one transfer), ds:split(w) -> inputs, targets of one
of them; ds:starts(k) -> batch k's window starts; ds:len() -> the file's length in tokens.]])

function data.tokens(path, opts)
  local dtype = opts and opts.dtype or "u16"
  if dtype ~= "u16" and dtype ~= "u32" then
    error("data.tokens: option dtype must be \"u16\" or \"u32\", got " .. tostring(dtype), 2)
  end
  return open("tokens", path, opts, dtype)
end
doc(data.tokens, [[data.tokens(path, {dtype = "u16" | "u32", seq_len =, batch =[, seed =][, device =]}) -> ds

Like data.bytes over a file of little-endian u16 or u32 token ids.]])

-- Batches k .. k + n - 1 as one [n, B, T + 1] tensor on the device: one host-to-device copy
-- (a copy waits for the device, so a training loop fetches many steps' batches at once).
function Dataset:windows(k, n)
  if type(k) ~= "number" or k < 0 or k ~= math.floor(k) then
    error("ds:batch: the batch number must be a non-negative integer, got " .. tostring(k), 2)
  end
  local B, T = self.batch_size, self.seq_len
  local w = self.file:windows(self.seed, k * B, n * B, T + 1):view(n, B, T + 1)
  if self.device ~= "cpu" then w = w:to(self.device) end
  return w
end

-- One batch's windows [B, T + 1] -> inputs, targets [B, T].
function Dataset:split(w)
  local T = self.seq_len
  return w:narrow(1, 0, T):contiguous(), w:narrow(1, 1, T):contiguous()
end

-- Batch k: windows kB .. kB + B - 1.
function Dataset:batch(k)
  return self:split(self:windows(k, 1):select(0, 0))
end

-- The 0-based starts of batch k's windows (for tests and debugging).
function Dataset:starts(k)
  return self.file:window_starts(self.seed, k * self.batch_size, self.batch_size, self.seq_len + 1)
end

function Dataset:len() return self.file:len() end

function Dataset:__tostring()
  return ("Dataset(%s, %s tokens of %s, seq_len=%d, batch=%d, seed=%d)"):format(
    self.path, self.file:len(), self.dtype, self.seq_len, self.batch_size, self.seed)
end

return data
