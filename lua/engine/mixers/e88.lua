-- The "e88" mixer of ladder models: the E88 matrix-state delta rule (engine.F.e88) with its
-- projections.
--   qkv = silu(x W_qkv)              one fused GEMM, no bias; q, k [B,T,H,n], v [B,T,H,v]
--   decay = exp(-exp(A_log) * softplus(x W_a + dt_bias))     one value per token and head
--   g = x W_g (gate on)              y = e88(q, k, v, decay, g) -> [B,T,H*v] -> W_o
-- A_log = log U(0,16) and dt_bias = softplus^-1(dt), dt log-uniform in [1e-3, 0.1]; neither gets
-- weight decay. Options: n_heads (default dim / 32), n_state (32), expansion (v = n_state *
-- expansion, default 1), gate (true), l2 (true), linear_state (false), std, dtype, device.
local engine = require "engine"
local nn, F = engine.nn, engine.F

local E88 = nn.Module:extend("E88")

-- A vector parameter with given values (values computed on the CPU in f64).
local function vector_param(values, opts)
  local p = nn.parameter({#values}, {fill = 0}, opts)
  local v = engine.tensor(values, {dtype = "f64"})
  engine.no_grad(function() p:copy_(v) end)
  return p
end

function E88:init(dim, opts)
  local n = opts.n_state or 32
  local H = opts.n_heads or math.max(1, math.floor(dim / n))
  local v = math.floor(n * (opts.expansion or 1) + 0.5)
  self.dim, self.H, self.n, self.v = dim, H, n, v
  self.gate = opts.gate ~= false
  self.l2, self.linear_state = opts.l2 ~= false, opts.linear_state == true
  local o = {bias = false, std = opts.std, dtype = opts.dtype, device = opts.device}
  self:add_module("qkv", nn.Linear(dim, H * (2 * n + v), o))
  self:add_module("a", nn.Linear(dim, H, o))
  if self.gate then self:add_module("g", nn.Linear(dim, H * v, o)) end
  self:add_module("out", nn.Linear(H * v, dim, o))
  local A_log, dt_bias = {}, {}
  for h = 1, H do
    A_log[h] = math.log(math.max(engine.rand({1}):item() * 16, 1e-4))
    local dt = math.exp(math.log(1e-3) + engine.rand({1}):item() * (math.log(0.1) - math.log(1e-3)))
    dt_bias[h] = dt + math.log(1 - math.exp(-dt)) -- softplus^-1(dt) = log(e^dt - 1)
  end
  self:add_parameter("A_log", vector_param(A_log, opts), {no_decay = true})
  self:add_parameter("dt_bias", vector_param(dt_bias, opts), {no_decay = true})
end

function E88:forward(x, state)
  local s = x:shape()
  local B, T, H, n, v = s[1], s[2], self.H, self.n, self.v
  local qkv = self.qkv(x):silu()
  local q = qkv:narrow(-1, 0, H * n):reshape(B, T, H, n)
  local k = qkv:narrow(-1, H * n, H * n):reshape(B, T, H, n)
  local vv = qkv:narrow(-1, 2 * H * n, H * v):reshape(B, T, H, v)
  local dt = F.softplus(self.a(x) + self.dt_bias:to(x:dtype()))
  local decay = (-(self.A_log:exp():to(x:dtype()) * dt)):exp()
  local g = self.gate and self.g(x):reshape(B, T, H, v) or nil
  local y, S_T = F.e88(q, k, vv, decay, g, {state = state, l2 = self.l2, linear_state = self.linear_state})
  return self.out(y:reshape(B, T, H * v)), S_T
end

function E88:extra_repr()
  return ("%d, heads=%d, n_state=%d, v=%d%s%s%s"):format(self.dim, self.H, self.n, self.v,
    self.gate and "" or ", no gate", self.l2 and "" or ", no l2", self.linear_state and ", linear state" or "")
end

return function(dim, opts) return E88(dim, opts) end
