-- The "mlp" mixer of ladder models: a SwiGLU MLP with hidden size round(expansion * dim).
local nn = require("engine").nn

return function(dim, opts)
  local hidden = math.floor((opts.expansion or 1.5) * dim + 0.5)
  return nn.SwiGLU(dim, hidden, opts)
end
