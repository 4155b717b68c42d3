-- engine.plot: the SVG is well formed (balanced tags, quoted attributes, finite numbers), the bars
-- and points sit where the values say, text is escaped, and bad input is a clear error.
local t = require "spec"
local engine = require "engine"
local plot = engine.plot

-- Parses the XML subset we write; returns the elements {name=, attrs=, text=} in document order.
local function parse_xml(s)
  local elements, stack, pos = {}, {}, 1
  local decl = s:match("^%s*<svg ")
  t.truthy(decl, "starts with <svg")
  while true do
    local lt = s:find("<", pos, true)
    if not lt then break end
    local text = s:sub(pos, lt - 1)
    if #stack > 0 and text:find("%S") then
      t.truthy(not text:find("[<>]") and not text:find("&[^#%a]"), "escaped text: " .. text)
      stack[#stack].text = (stack[#stack].text or "") .. text
    end
    local gt = s:find(">", lt, true)
    t.truthy(gt, "tag closed")
    local tag = s:sub(lt + 1, gt - 1)
    pos = gt + 1
    if tag:sub(1, 1) == "/" then
      local top = table.remove(stack)
      t.eq(top and top.name, tag:sub(2), "closing tag matches")
    else
      local self_closing = tag:sub(-1) == "/"
      if self_closing then tag = tag:sub(1, -2) end
      local name, rest = tag:match("^([%w:]+)(.*)$")
      t.truthy(name, "element name in <" .. tag .. ">")
      local attrs = {}
      local leftover = rest:gsub('%s+([%w:%-]+)="([^"<>]*)"', function(k, v)
        t.truthy(attrs[k] == nil, "attribute " .. k .. " once")
        attrs[k] = v
        return ""
      end)
      t.truthy(not leftover:find("%S"), "only quoted attributes in <" .. tag .. ">")
      local el = {name = name, attrs = attrs}
      elements[#elements + 1] = el
      if not self_closing then stack[#stack + 1] = el end
    end
  end
  t.eq(#stack, 0, "every element closed")
  t.truthy(not s:sub(pos):find("%S"), "nothing after </svg>")
  -- numeric attributes are finite numbers
  for _, el in ipairs(elements) do
    for _, k in ipairs {"x", "y", "width", "height", "x1", "y1", "x2", "y2", "cx", "cy", "r"} do
      local v = el.attrs[k]
      if v then
        local n = tonumber(v)
        t.truthy(n and n == n and n > -1e9 and n < 1e9, el.name .. " " .. k .. "=" .. v)
      end
    end
    if el.attrs.points then
      for a, b in el.attrs.points:gmatch("([^,%s]+),([^,%s]+)") do
        t.truthy(tonumber(a) and tonumber(b), "point " .. a .. "," .. b)
      end
    end
  end
  return elements
end

local function all(elements, name)
  local out = {}
  for _, el in ipairs(elements) do if el.name == name then out[#out + 1] = el end end
  return out
end

t.case("bar: one bar per value, lengths proportional, labels escaped, file written", function()
  local path = os.tmpname()
  local values = {12.5, 7.25, 2.5, 0}
  local svg = plot.bar {title = "step <time> & more", labels = {"GEMM", "E88 bwd", "a<b", "zero"},
                        values = values, unit = "ms", path = path}
  local f = assert(io.open(path))
  t.eq(f:read("*a"), svg, "the file holds the returned text")
  f:close()
  os.remove(path)
  local el = parse_xml(svg)
  local rects = all(el, "rect")
  t.eq(#rects, 5, "background and 4 bars")
  for i = 2, 5 do
    t.near(tonumber(rects[i].attrs.width) / tonumber(rects[2].attrs.width), values[i - 1] / values[1],
           1e-3, "bar " .. (i - 1))
  end
  local texts = {}
  for _, e in ipairs(all(el, "text")) do texts[#texts + 1] = e.text end
  local joined = table.concat(texts, "|")
  t.truthy(joined:find("step &lt;time&gt; &amp; more", 1, true), joined)
  t.truthy(joined:find("a&lt;b", 1, true))
  t.truthy(joined:find("12.5 ms", 1, true))
end)

t.case("lines: a polyline and markers per series, ticks at each x, log axis", function()
  local x = {1, 4, 8, 16, 32}
  local svg = plot.lines {title = "forward time", x = x,
                          series = {{name = "E1", y = {1, 2, 3, 5, 9}}, {name = "E23", y = {2, 3, 4, 6, 12}}},
                          xlabel = "batch", ylabel = "ms", logx = true}
  local el = parse_xml(svg)
  local lines = all(el, "polyline")
  t.eq(#lines, 2)
  t.eq(#all(el, "circle"), 10)
  -- on a log axis the points are evenly spaced in log(x)
  local px = {}
  for a in lines[1].attrs.points:gmatch("([^,%s]+),[^,%s]+") do px[#px + 1] = tonumber(a) end
  t.eq(#px, 5)
  local span = px[5] - px[1]
  for i = 2, 5 do
    t.near((px[i] - px[1]) / span, math.log(x[i]) / math.log(32), 1e-3, "x position " .. i)
  end
  -- y grows upwards: the larger value sits higher (smaller y)
  local ys = {}
  for b in lines[1].attrs.points:gmatch("[^,%s]+,([^,%s]+)") do ys[#ys + 1] = tonumber(b) end
  for i = 2, 5 do t.truthy(ys[i] < ys[i - 1], "point " .. i .. " is higher") end
  local texts = {}
  for _, e in ipairs(all(el, "text")) do texts[#texts + 1] = e.text end
  local joined = table.concat(texts, "|")
  for _, label in ipairs {"E1", "E23", "batch (log scale)", "16", "32"} do
    t.truthy(joined:find(label, 1, true), label .. " shown")
  end
  parse_xml(plot.lines {x = {0, 1}, series = {{y = {5, 5}}}, logy = false}) -- flat line, x from 0
end)

t.case("bad input is a clear error", function()
  t.raises(function() plot.bar {labels = {"a"}, values = {1, 2}} end, "plot.bar: labels and values differ")
  t.raises(function() plot.bar {labels = {"a"}, values = {0 / 0}} end, "value 1 must be a finite number")
  t.raises(function() plot.bar {labels = {}, values = {}} end, "nothing to plot")
  t.raises(function() plot.bar {labels = {"a"}, values = {1}, colour = 1} end, "unknown option 'colour'")
  t.raises(function() plot.lines {x = {1, 2}, series = {{y = {1}}}} end, "series 1 needs y with one value per x")
  t.raises(function() plot.lines {x = {0, 2}, series = {{y = {1, 2}}}, logx = true} end, "logx needs x > 0")
  t.raises(function() plot.lines {x = {1, 2}, series = {}} end, "series must be a non-empty array")
end)
