-- The "e23" mixer of ladder models: the dual-memory cell (engine.F.e23: a tape of n_slots rows
-- read and written by attention each step, plus a working memory h) with E1's projections:
-- y = h * silu(z), out = y W_out (see mixers/elman.lua). Options: n_slots (8, from 8 to 64),
-- expansion (1), spectral_norm (false), std, dtype, device.
local engine = require "engine"
local nn = engine.nn
local elman = require "engine.mixers.elman"

local E23 = nn.Module:extend("E23")

function E23:init(dim, opts)
  local d = elman.init(self, dim, opts)
  self.n_slots = opts.n_slots or 8
  if self.n_slots < 1 then error("e23: n_slots must be at least 1", 3) end
  self:add_parameter("W_write", nn.parameter({d, d}, {std = 1 / math.sqrt(d)}, opts))
end

function E23:forward(x, state, tape)
  local xw, z = elman.inputs(self, x)
  local hs, h_T, tape_T = engine.F.e23(xw:contiguous(), elman.recurrent_weight(self), self.W_write, self.b,
                                       {state = state, tape = tape, n_slots = self.n_slots})
  return self.out(hs * z:silu()), h_T, tape_T
end

function E23:extra_repr()
  return ("%d, d=%d, n_slots=%d%s"):format(self.dim, self.d, self.n_slots, self.spectral_norm and ", spectral norm" or "")
end

return function(dim, opts) return E23(dim, opts) end
