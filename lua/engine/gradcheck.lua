-- engine.gradcheck(fn, inputs[, opts]): compares autograd's gradients of fn with central finite
-- differences. The inputs that require grad should be f64 CPU tensors (finite differences need the
-- precision). fn may return one tensor or several; the check differentiates the scalar
-- L = sum_j sum(out_j * r_j) with fixed pseudo-random weights r_j, so every output entry counts.
local engine = require "engine"
local unpack = table.unpack or unpack

local function weights(like, salt)
  -- deterministic, non-zero, varied: no RNG state is touched
  local n, v = like:numel(), {}
  for i = 1, n do v[i] = 0.5 + math.abs(math.sin(i * 12.9898 + salt * 78.233)) end
  return engine.tensor(v, {dtype = like:dtype(), device = like:device()}):view(like:shape())
end

local function floats(outs)
  local keep = {}
  for _, o in ipairs(outs) do
    if engine.is_tensor(o) and o:dtype():match("^f") then keep[#keep + 1] = o end
  end
  return keep
end

return function(fn, inputs, opts)
  opts = opts or {}
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
  local wrt = {}
  for _, x in ipairs(inputs) do
    if engine.is_tensor(x) and x:requires_grad() then wrt[#wrt + 1] = x end
  end
  if #wrt == 0 then error("gradcheck: no input requires grad", 2) end

  local outs = floats({fn(unpack(inputs))})
  if #outs == 0 then error("gradcheck: fn returned no floating tensor", 2) end
  local r = {}
  for j, o in ipairs(outs) do r[j] = weights(o, j) end
  local function loss(list)
    local total
    for j, o in ipairs(list) do
      local term = (o * r[j]):sum()
      total = total and total + term or term
    end
    return total
  end
  local analytic = engine.grad(loss(outs), wrt)

  local function numeric_loss()
    return engine.no_grad(function() return loss(floats({fn(unpack(inputs))})):item() end)
  end
  for k, x in ipairs(wrt) do
    local flat = engine.no_grad(function() return x:detach():view(-1) end)
    local got = analytic[k] and analytic[k]:to("f64"):cpu():reshape(-1):tolist() or nil
    for i = 0, flat:numel() - 1 do
      local x0 = flat:get(i)
      flat:set(i, x0 + eps)
      local lp = numeric_loss()
      flat:set(i, x0 - eps)
      local lm = numeric_loss()
      flat:set(i, x0)
      local want = (lp - lm) / (2 * eps)
      local have = got and got[i + 1] or 0
      if math.abs(have - want) > atol + rtol * math.abs(want) then
        error(string.format("gradcheck: input %d, element %d: autograd %.10g, finite differences %.10g",
                            k, i, have, want), 2)
      end
    end
  end
  return true
end
