-- The "e1" mixer of ladder models: the gated Elman cell (engine.F.e1) with its projections:
-- h_t = tanh(xw_t + h_{t-1} W_h^T + b), y = h * silu(z), out = y W_out (see mixers/elman.lua).
-- Options: expansion (1), spectral_norm (false), std, dtype, device.
local engine = require "engine"
local elman = require "engine.mixers.elman"

local E1 = engine.nn.Module:extend("E1")

function E1:init(dim, opts) elman.init(self, dim, opts) end

function E1:forward(x, state)
  local xw, z = elman.inputs(self, x)
  local y, h_T = engine.F.e1(xw:contiguous(), z:contiguous(), elman.recurrent_weight(self), self.b, {state = state})
  return self.out(y), h_T
end

function E1:extra_repr()
  return ("%d, d=%d%s"):format(self.dim, self.d, self.spectral_norm and ", spectral norm" or "")
end

return function(dim, opts) return E1(dim, opts) end
