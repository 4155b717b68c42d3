-- A small JSON reader and writer for the bench scripts (plain Lua 5.1 / LuaJIT, no modules).
-- decode: objects -> tables, arrays -> sequences, null -> json.null (a unique value).
-- encode: tables with only keys 1..n are arrays, others objects (keys sorted, so output is stable);
-- NaN and infinities, which JSON lacks, are written as null.
local json = {}
json.null = setmetatable({}, {__tostring = function() return "null" end})

-- ---- decode ----

local function decode_error(s, i, what)
  local line = 1
  for _ in s:sub(1, i):gmatch("\n") do line = line + 1 end
  error(string.format("json: %s at line %d (byte %d)", what, line, i), 0)
end

local function skip(s, i)
  local _, e = s:find("^[ \t\r\n]*", i)
  return e + 1
end

local escapes = {['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r",
                 t = "\t"}

local function utf8_char(c)
  if c < 0x80 then return string.char(c) end
  if c < 0x800 then
    return string.char(0xC0 + math.floor(c / 0x40), 0x80 + c % 0x40)
  end
  if c < 0x10000 then
    return string.char(0xE0 + math.floor(c / 0x1000), 0x80 + math.floor(c / 0x40) % 0x40,
                       0x80 + c % 0x40)
  end
  return string.char(0xF0 + math.floor(c / 0x40000), 0x80 + math.floor(c / 0x1000) % 0x40,
                     0x80 + math.floor(c / 0x40) % 0x40, 0x80 + c % 0x40)
end

local decode_value

local function decode_string(s, i) -- s:sub(i, i) == '"'
  local out, j = {}, i + 1
  while true do
    local c = s:sub(j, j)
    if c == "" then decode_error(s, i, "unterminated string") end
    if c == '"' then return table.concat(out), j + 1 end
    if c == "\\" then
      local e = s:sub(j + 1, j + 1)
      if e == "u" then
        local hex = s:sub(j + 2, j + 5)
        if not hex:match("^%x%x%x%x$") then decode_error(s, j, "bad \\u escape") end
        local code = tonumber(hex, 16)
        j = j + 6
        if code >= 0xD800 and code < 0xDC00 and s:sub(j, j + 1) == "\\u" then -- a surrogate pair
          local lo = tonumber(s:sub(j + 2, j + 5), 16)
          if lo and lo >= 0xDC00 and lo < 0xE000 then
            code = 0x10000 + (code - 0xD800) * 0x400 + (lo - 0xDC00)
            j = j + 6
          end
        end
        out[#out + 1] = utf8_char(code)
      elseif escapes[e] then
        out[#out + 1] = escapes[e]
        j = j + 2
      else
        decode_error(s, j, "bad escape")
      end
    else
      local k = s:find('["\\]', j)
      if not k then decode_error(s, i, "unterminated string") end
      out[#out + 1] = s:sub(j, k - 1)
      j = k
    end
  end
end

function decode_value(s, i)
  i = skip(s, i)
  local c = s:sub(i, i)
  if c == "{" then
    local obj = {}
    i = skip(s, i + 1)
    if s:sub(i, i) == "}" then return obj, i + 1 end
    while true do
      i = skip(s, i)
      if s:sub(i, i) ~= '"' then decode_error(s, i, "expected a string key") end
      local key
      key, i = decode_string(s, i)
      i = skip(s, i)
      if s:sub(i, i) ~= ":" then decode_error(s, i, "expected ':'") end
      obj[key], i = decode_value(s, i + 1)
      i = skip(s, i)
      local d = s:sub(i, i)
      if d == "}" then return obj, i + 1 end
      if d ~= "," then decode_error(s, i, "expected ',' or '}'") end
      i = i + 1
    end
  elseif c == "[" then
    local arr = {}
    i = skip(s, i + 1)
    if s:sub(i, i) == "]" then return arr, i + 1 end
    while true do
      arr[#arr + 1], i = decode_value(s, i)
      i = skip(s, i)
      local d = s:sub(i, i)
      if d == "]" then return arr, i + 1 end
      if d ~= "," then decode_error(s, i, "expected ',' or ']'") end
      i = i + 1
    end
  elseif c == '"' then
    return decode_string(s, i)
  elseif s:sub(i, i + 3) == "true" then
    return true, i + 4
  elseif s:sub(i, i + 4) == "false" then
    return false, i + 5
  elseif s:sub(i, i + 3) == "null" then
    return json.null, i + 4
  else
    local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", i)
    if not num or num == "" or not tonumber(num) then decode_error(s, i, "unexpected character") end
    return tonumber(num), i + #num
  end
end

function json.decode(s)
  if type(s) ~= "string" then error("json.decode: expected a string, got " .. type(s), 2) end
  local v, i = decode_value(s, 1)
  i = skip(s, i)
  if i <= #s then decode_error(s, i, "trailing characters") end
  return v
end

function json.read(path)
  local f, err = io.open(path, "rb")
  if not f then error("json: cannot open " .. tostring(err), 0) end
  local s = f:read("*a")
  f:close()
  local ok, v = pcall(json.decode, s)
  if not ok then error(path .. ": " .. tostring(v), 0) end
  return v
end

-- ---- encode ----

local function encode_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    local named = {['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t"}
    return named[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function is_array(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  for k = 1, n do
    if t[k] == nil then return false end
  end
  return true, n
end

local function encode_value(v, indent, depth, out)
  local kind = type(v)
  if v == nil or v == json.null then
    out[#out + 1] = "null"
  elseif kind == "boolean" then
    out[#out + 1] = tostring(v)
  elseif kind == "number" then
    if v ~= v or v == math.huge or v == -math.huge then
      out[#out + 1] = "null"
    elseif v == math.floor(v) and math.abs(v) < 2 ^ 53 then
      out[#out + 1] = string.format("%d", v)
    else
      out[#out + 1] = string.format("%.10g", v)
    end
  elseif kind == "string" then
    out[#out + 1] = encode_string(v)
  elseif kind == "table" then
    local pad = indent and "\n" .. string.rep(indent, depth + 1) or ""
    local close = indent and "\n" .. string.rep(indent, depth) or ""
    local arr, n = is_array(v)
    if arr and n > 0 then
      out[#out + 1] = "["
      for k = 1, n do
        out[#out + 1] = (k > 1 and "," or "") .. pad
        encode_value(v[k], indent, depth + 1, out)
      end
      out[#out + 1] = close .. "]"
    elseif arr then
      out[#out + 1] = "{}"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" then
          error("json.encode: object keys must be strings, got " .. type(k), 0)
        end
        keys[#keys + 1] = k
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        out[#out + 1] = (i > 1 and "," or "") .. pad .. encode_string(k) .. (indent and ": " or ":")
        encode_value(v[k], indent, depth + 1, out)
      end
      out[#out + 1] = close .. "}"
    end
  else
    error("json.encode: cannot encode a " .. kind, 0)
  end
end

-- indent: nil for one line, else a string such as "  ".
function json.encode(v, indent)
  local out = {}
  encode_value(v, indent, 0, out)
  return table.concat(out)
end

function json.write(path, v)
  local f, err = io.open(path, "wb")
  if not f then error("json: cannot write " .. tostring(err), 0) end
  f:write(json.encode(v, "  "), "\n")
  f:close()
end

return json
