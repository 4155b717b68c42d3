-- The "attention" mixer of ladder models: causal multi-head softmax attention from basic ops
-- (qkv projection, heads, scaled scores plus a -inf upper triangle, softmax, matmul, output
-- projection). opts.n_heads (default dim / 64, at least 1) must divide dim.
local engine = require "engine"
local nn = engine.nn

local Attention = nn.Module:extend("Attention")

function Attention:init(dim, opts)
  local heads = opts.n_heads or math.max(1, math.floor(dim / 64))
  if dim % heads ~= 0 then
    error(("attention: n_heads (%d) must divide dim (%d)"):format(heads, dim), 3)
  end
  self.dim, self.n_heads, self.head_dim = dim, heads, dim / heads
  local o = {bias = false, std = opts.std, dtype = opts.dtype, device = opts.device}
  self:add_module("qkv", nn.Linear(dim, 3 * dim, o))
  self:add_module("out", nn.Linear(dim, dim, o))
  self.masks = {} -- T .. dtype .. device -> [T, T] additive mask, made once (a copy to the GPU waits)
end

-- 0 on and below the diagonal, -inf above it.
function Attention:mask(T, dtype, device)
  local key = T .. dtype .. device
  local m = self.masks[key]
  if not m then
    local i = engine.arange(T):view(T, 1)
    local j = engine.arange(T):view(1, T)
    m = engine.where(j:gt(i), -math.huge, 0):to{dtype = dtype, device = device}
    self.masks[key] = m
  end
  return m
end

function Attention:forward(x)
  local s = x:shape()
  local B, T, D, H, hd = s[1], s[2], s[3], self.n_heads, self.head_dim
  local qkv = self.qkv(x):view(B, T, 3, H, hd):permute(2, 0, 3, 1, 4) -- [3, B, H, T, hd]
  local q, k, v = qkv:select(0, 0), qkv:select(0, 1), qkv:select(0, 2)
  local scores = q:matmul(k:transpose(-2, -1)) * (1 / math.sqrt(hd))
  local p = (scores + self:mask(T, scores:dtype(), scores:device())):softmax(-1)
  local y = p:matmul(v):permute(0, 2, 1, 3):reshape(B, T, D)
  return self.out(y)
end

function Attention:extra_repr()
  return ("%d, heads=%d"):format(self.dim, self.n_heads)
end

return Attention
