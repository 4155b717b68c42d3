-- What the E1 and E23 mixers share: the input split, silu, and the output gate and projection.
--   [x, z] = split(x W_in); x <- silu(x); xw = x W_x^T (one GEMM over all steps)
--   h = cell(xw, ...); y = h * silu(z); out = y W_out
-- d = dim * expansion (default 1). W_h starts at normal(0, 0.5/sqrt(d)) (spectral radius about
-- 0.5); with spectral_norm = true it is scaled to a spectral radius <= 0.99 before each forward
-- (3 power-iteration steps; the scale is treated as a constant).
local engine = require "engine"
local nn = engine.nn

local M = {}

function M.init(self, dim, opts)
  local d = math.floor(dim * (opts.expansion or 1) + 0.5)
  self.dim, self.d = dim, d
  self.spectral_norm = opts.spectral_norm == true
  local o = {bias = false, std = opts.std, dtype = opts.dtype, device = opts.device}
  self:add_module("in_proj", nn.Linear(dim, 2 * d, o))
  self:add_module("W_x", nn.Linear(d, d, o))
  self:add_module("out", nn.Linear(d, dim, o))
  self:add_parameter("W_h", nn.parameter({d, d}, {std = 0.5 / math.sqrt(d)}, opts))
  self:add_parameter("b", nn.parameter({d}, {fill = 0}, opts), {no_decay = true})
  return d
end

-- W_h, scaled to spectral radius <= 0.99 when asked (the largest singular value bounds it).
function M.recurrent_weight(self)
  if not self.spectral_norm then return self.W_h end
  local scale = engine.no_grad(function()
    local W = self.W_h:to("f32")
    local function unit(t) return t / (t:pow(2):sum():sqrt() + 1e-12) end
    if self.u and self.u:device() ~= W:device() then self.u = nil end
    local u, v = self.u or unit(engine.randn({self.d}, {device = W:device()}))
    for _ = 1, 3 do
      v = unit(W:t():matmul(u))
      u = unit(W:matmul(v))
    end
    self.u = u -- warm start for the next forward
    local sigma = (u * W:matmul(v)):sum():item()
    return sigma > 0.99 and 0.99 / sigma or 1
  end)
  return scale == 1 and self.W_h or self.W_h * scale
end

-- xw and z from the mixer's input.
function M.inputs(self, x)
  local xz = self.in_proj(x)
  local xi = xz:narrow(-1, 0, self.d):silu()
  local z = xz:narrow(-1, self.d, self.d)
  return self.W_x(xi), z
end

return M
