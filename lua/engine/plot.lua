-- engine.plot: small SVG charts with no dependencies, for reports a person can look at.
--
--   plot.bar{title = "step time", labels = {"GEMM", "E88 bwd"}, values = {12.5, 7.1}, unit = "ms",
--            path = "breakdown.svg"}
--   plot.lines{title = "forward time vs batch", x = {1, 4, 8, 16, 32},
--              series = {{name = "E1", y = {...}}, {name = "E23", y = {...}}},
--              xlabel = "batch", ylabel = "ms / step", logx = true, path = "scaling.svg"}
--
-- Both return the SVG text and write it to `path` when given.
local engine = require "engine"

local M = {}

local FONT = 'font-family="Helvetica, Arial, sans-serif"'
local COLORS = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
                "#ff9da7", "#9c755f", "#bab0ac"}
local CHAR_W = 7 -- rough width of a 12px character

local function esc(s)
  return (tostring(s):gsub("[&<>\"']", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;",
                                         ['"'] = "&quot;", ["'"] = "&#39;"}))
end

local function num(v) return string.format("%.2f", v) end

local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

local function check(cond, fname, msg)
  if not cond then error(fname .. ": " .. msg, 3) end
end

local function check_keys(opts, fname, allowed)
  check(type(opts) == "table", fname, "argument 1 must be a table of options")
  for k in pairs(opts) do
    check(allowed[k], fname, "unknown option '" .. tostring(k) .. "'")
  end
end

local function finish(svg, path, fname)
  local text = table.concat(svg, "\n") .. "\n"
  if path then
    local f, err = io.open(path, "w")
    if not f then error(fname .. ": " .. tostring(err), 3) end
    f:write(text)
    f:close()
  end
  return text
end

local function header(w, h, title)
  return {
    string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">',
                  w, h, w, h),
    string.format('<rect x="0" y="0" width="%d" height="%d" fill="white"/>', w, h),
    string.format('<text x="%d" y="22" %s font-size="16" font-weight="bold" text-anchor="middle">%s</text>',
                  math.floor(w / 2), FONT, esc(title or "")),
  }
end

-- A short label for a value: 3 significant digits.
local function fmt(v)
  if v == 0 then return "0" end
  local a = math.abs(v)
  if a >= 1e5 or a < 1e-3 then return string.format("%.2e", v) end
  return (string.format("%.3g", v))
end

-- plot.bar{title =, labels =, values =, unit =, path =, width = 800}: horizontal bars, largest
-- first as given (the caller orders them), each labelled with its value.
function M.bar(opts)
  check_keys(opts, "plot.bar", {title = true, labels = true, values = true, unit = true,
                                path = true, width = true})
  local labels, values = opts.labels, opts.values
  check(type(labels) == "table" and type(values) == "table", "plot.bar", "labels and values must be arrays")
  check(#labels == #values, "plot.bar", "labels and values differ in length (" .. #labels ..
        " and " .. #values .. ")")
  check(#values > 0, "plot.bar", "nothing to plot")
  local vmax = 0
  for i, v in ipairs(values) do
    check(finite(v) and v >= 0, "plot.bar", "value " .. i .. " must be a finite number >= 0")
    vmax = math.max(vmax, v)
  end
  local label_w = 0
  for _, l in ipairs(labels) do label_w = math.max(label_w, #tostring(l)) end
  label_w = math.min(label_w, 48) * CHAR_W + 16
  local w = opts.width or 800
  local row, top = 26, 40
  local h = top + #values * row + 30
  local x0, bar_max = label_w, w - label_w - 110
  check(bar_max > 20, "plot.bar", "width too small for the labels")
  local svg = header(w, h, opts.title)
  local unit = opts.unit and (" " .. opts.unit) or ""
  for i, v in ipairs(values) do
    local y = top + (i - 1) * row
    local len = vmax > 0 and bar_max * v / vmax or 0
    local label = tostring(labels[i])
    if #label > 48 then label = label:sub(1, 45) .. "..." end
    svg[#svg + 1] = string.format('<text x="%s" y="%s" %s font-size="12" text-anchor="end">%s</text>',
                                  num(x0 - 8), num(y + 16), FONT, esc(label))
    svg[#svg + 1] = string.format('<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>',
                                  num(x0), num(y + 4), num(len), num(row - 8),
                                  COLORS[(i - 1) % #COLORS + 1])
    svg[#svg + 1] = string.format('<text x="%s" y="%s" %s font-size="12">%s</text>',
                                  num(x0 + len + 6), num(y + 16), FONT, esc(fmt(v) .. unit))
  end
  svg[#svg + 1] = string.format('<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="black"/>', num(x0),
                                top, num(x0), top + #values * row)
  svg[#svg + 1] = "</svg>"
  return finish(svg, opts.path, "plot.bar")
end

-- Tick values for [lo, hi]: steps of 1, 2 or 5 times a power of ten.
local function nice_ticks(lo, hi)
  if hi <= lo then hi = lo + 1 end
  local raw = (hi - lo) / 5
  local p = 10 ^ math.floor(math.log10(raw))
  local step = p
  for _, m in ipairs {1, 2, 5, 10} do
    if p * m >= raw then
      step = p * m
      break
    end
  end
  local ticks = {}
  for v = math.floor(lo / step) * step, hi + step * 1e-9, step do ticks[#ticks + 1] = v end
  return ticks, ticks[1], math.max(ticks[#ticks], hi)
end

-- plot.lines{title =, x =, series = {{name =, y =}, ...}, xlabel =, ylabel =, logx =, logy =,
-- path =, width = 720, height = 440}: one polyline with markers per series, and a legend.
function M.lines(opts)
  check_keys(opts, "plot.lines", {title = true, x = true, series = true, xlabel = true,
                                  ylabel = true, logx = true, logy = true, path = true,
                                  width = true, height = true})
  local xs, series = opts.x, opts.series
  check(type(xs) == "table" and #xs > 0, "plot.lines", "x must be a non-empty array")
  check(type(series) == "table" and #series > 0, "plot.lines", "series must be a non-empty array")
  for i, x in ipairs(xs) do
    check(finite(x), "plot.lines", "x[" .. i .. "] must be a finite number")
    check(not opts.logx or x > 0, "plot.lines", "logx needs x > 0")
  end
  local ylo, yhi = math.huge, -math.huge
  for s, ser in ipairs(series) do
    check(type(ser) == "table" and type(ser.y) == "table" and #ser.y == #xs, "plot.lines",
          "series " .. s .. " needs y with one value per x")
    for i, y in ipairs(ser.y) do
      check(finite(y), "plot.lines", "series " .. s .. " y[" .. i .. "] must be a finite number")
      check(not opts.logy or y > 0, "plot.lines", "logy needs y > 0")
      ylo, yhi = math.min(ylo, y), math.max(yhi, y)
    end
  end
  local tx = opts.logx and math.log10 or function(v) return v end
  local ty = opts.logy and math.log10 or function(v) return v end
  local w, h = opts.width or 720, opts.height or 440
  local left, right, top, bottom = 70, 150, 40, 50
  local pw, ph = w - left - right, h - top - bottom

  local xlo, xhi = math.huge, -math.huge
  for _, x in ipairs(xs) do xlo, xhi = math.min(xlo, tx(x)), math.max(xhi, tx(x)) end
  if xhi == xlo then xlo, xhi = xlo - 1, xhi + 1 end
  local yticks
  if opts.logy then
    ylo, yhi = math.floor(ty(ylo)), math.ceil(ty(yhi))
    if yhi == ylo then yhi = ylo + 1 end
    yticks = {}
    for e = ylo, yhi do yticks[#yticks + 1] = e end
  else
    yticks, ylo, yhi = nice_ticks(math.min(0, ylo), yhi)
  end
  local function px(x) return left + pw * (tx(x) - xlo) / (xhi - xlo) end
  local function py(yv) return top + ph - ph * (yv - ylo) / (yhi - ylo) end

  local svg = header(w, h, opts.title)
  svg[#svg + 1] = string.format('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>',
                                left, top, pw, ph)
  for _, t in ipairs(yticks) do
    local y = py(t)
    svg[#svg + 1] = string.format('<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#dddddd"/>', left,
                                  num(y), left + pw, num(y))
    svg[#svg + 1] = string.format('<text x="%d" y="%s" %s font-size="11" text-anchor="end">%s</text>',
                                  left - 6, num(y + 4), FONT, esc(fmt(opts.logy and 10 ^ t or t)))
  end
  for _, x in ipairs(xs) do -- a tick at every x (batch sizes, lengths: few and meaningful)
    local x1 = px(x)
    svg[#svg + 1] = string.format('<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#dddddd"/>',
                                  num(x1), top, num(x1), top + ph)
    svg[#svg + 1] = string.format('<text x="%s" y="%d" %s font-size="11" text-anchor="middle">%s</text>',
                                  num(x1), top + ph + 16, FONT, esc(fmt(x)))
  end
  for s, ser in ipairs(series) do
    local color = COLORS[(s - 1) % #COLORS + 1]
    local pts = {}
    for i, x in ipairs(xs) do pts[i] = num(px(x)) .. "," .. num(py(ty(ser.y[i]))) end
    svg[#svg + 1] = string.format('<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>',
                                  table.concat(pts, " "), color)
    for i, x in ipairs(xs) do
      svg[#svg + 1] = string.format('<circle cx="%s" cy="%s" r="3" fill="%s"/>', num(px(x)),
                                    num(py(ty(ser.y[i]))), color)
    end
    local ly = top + 10 + (s - 1) * 20
    svg[#svg + 1] = string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>',
                                  left + pw + 12, ly, left + pw + 32, ly, color)
    svg[#svg + 1] = string.format('<text x="%d" y="%d" %s font-size="12">%s</text>', left + pw + 38,
                                  ly + 4, FONT, esc(ser.name or ("series " .. s)))
  end
  if opts.xlabel then
    svg[#svg + 1] = string.format('<text x="%s" y="%d" %s font-size="13" text-anchor="middle">%s</text>',
                                  num(left + pw / 2), h - 12, FONT,
                                  esc(opts.xlabel .. (opts.logx and " (log scale)" or "")))
  end
  if opts.ylabel then
    svg[#svg + 1] = string.format(
      '<text x="16" y="%s" %s font-size="13" text-anchor="middle" transform="rotate(-90 16 %s)">%s</text>',
      num(top + ph / 2), FONT, num(top + ph / 2), esc(opts.ylabel .. (opts.logy and " (log scale)" or "")))
  end
  svg[#svg + 1] = "</svg>"
  return finish(svg, opts.path, "plot.lines")
end

engine.doc(M.bar, [[plot.bar{title =, labels =, values =, unit =, path =, width = 800} -> svg

Horizontal bars in the given order, each labelled with its value (values finite and >= 0).]])
engine.doc(M.lines, [[plot.lines{title =, x =, series = {{name =, y =}, ...}, xlabel =, ylabel =, logx =, logy =, path =} -> svg

One line with markers per series over x (a tick at every x), with a legend; log axes on request.]])
engine.doc(M, [[engine.plot

SVG charts without dependencies: plot.bar{title, labels, values, unit, path} (horizontal bars, e.g.
a profile breakdown) and plot.lines{title, x, series = {{name, y}}, xlabel, ylabel, logx, logy,
path} (e.g. time against batch size). Each returns the SVG text and writes it to path if given.]])

return M
