-- The training stack on CUDA against the CPU (run by tests/test_cuda_train.c on a GPU machine;
-- not auto-discovered by test_lua_specs, which runs tests/lua/*.lua only): data batches, ladder
-- models' losses and gradients, optimizer steps, clipping, dropout masks, checkpoints, a bf16
-- run that learns, and resume.
local t = require "spec"
local engine = require "engine"
local models, nn, optim, data = engine.models, engine.nn, engine.optim, engine.data

local FIXTURE = debug.getinfo(1, "S").source:match("^@(.*)/lua/cuda/[^/]*$") .. "/data/design.txt"

-- ||a - b|| / ||b|| in f64 on the CPU.
local function rel_err(a, b)
  a, b = a:cpu():double(), b:cpu():double()
  local d = a - b
  return math.sqrt((d * d):sum():item()) / math.max(1e-30, math.sqrt((b * b):sum():item()))
end

-- The same model on the CPU and on CUDA (same initial weights, f32).
local function twin_models(cfg)
  engine.manual_seed(11)
  cfg.device = "cpu"
  local cpu = models.ladder_lm(cfg)
  cfg.device = "cuda"
  local gpu = models.ladder_lm(cfg)
  gpu:load_state_dict(cpu:state_dict())
  return cpu, gpu
end

local function perturb_norms(m)
  engine.no_grad(function()
    for _, e in ipairs(m:named_parameters()) do
      if e.name:find("norm") then
        e.param:copy_(engine.rand(e.param:shape(), {device = e.param:device()}) + 0.5)
      end
    end
  end)
end

t.case("data batches on the device are the CPU's", function()
  local a = data.bytes(FIXTURE, {seq_len = 33, batch = 5, seed = 4})
  local b = data.bytes(FIXTURE, {seq_len = 33, batch = 5, seed = 4, device = "cuda"})
  for _, k in ipairs({0, 7}) do
    local x, y = a:batch(k)
    local gx, gy = b:batch(k)
    t.eq(gx:device(), "cuda:0")
    t.eq(gx:dtype(), "i64")
    t.eq(gx:cpu():tolist(), x:tolist())
    t.eq(gy:cpu():tolist(), y:tolist())
  end
end)

for _, layer in ipairs({"mlp", "attention"}) do
  t.case(layer .. " ladder: CUDA loss and gradients match the CPU (f32)", function()
    local cpu, gpu = twin_models{layer = layer, dim = 96, depth = 2, n_heads = 3}
    perturb_norms(cpu)
    gpu:load_state_dict(cpu:state_dict())
    local ds = data.bytes(FIXTURE, {seq_len = 67, batch = 3, seed = 2})
    local x, y = ds:batch(0)
    local lc = cpu:loss(x, y)
    local lg = gpu:loss(x:to("cuda"), y:to("cuda"))
    t.truthy(math.abs(lg:item() - lc:item()) < 2e-5 * lc:item(),
             ("loss cpu %.8f cuda %.8f"):format(lc:item(), lg:item()))
    lc:backward()
    lg:backward()
    local pc, pg = cpu:named_parameters(), gpu:named_parameters()
    for i, e in ipairs(pc) do
      local err = rel_err(pg[i].param:grad(), e.param:grad())
      t.truthy(err < 1e-4, ("%s: gradient rel err %.3g"):format(e.name, err))
    end
  end)
end

t.case("AdamW, schedule-free AdamW and SGD steps on CUDA match the CPU", function()
  for _, kind in ipairs({"AdamW", "ScheduleFreeAdamW", "SGD"}) do
    local cpu, gpu = twin_models{layer = "mlp", dim = 64, depth = 2}
    local oc = optim[kind](cpu, {lr = 1e-2})
    local og = optim[kind](gpu, {lr = 1e-2})
    local ds = data.bytes(FIXTURE, {seq_len = 32, batch = 4, seed = 3})
    for k = 0, 2 do
      local x, y = ds:batch(k)
      oc:zero_grad()
      og:zero_grad()
      cpu:loss(x, y):backward()
      gpu:loss(x:to("cuda"), y:to("cuda")):backward()
      -- the same gradients on both sides, so only the update is compared
      for i, p in ipairs(gpu:parameters()) do p:set_grad(cpu:parameters()[i]:grad():to("cuda")) end
      oc:step()
      og:step()
    end
    for i, e in ipairs(cpu:named_parameters()) do
      local err = rel_err(gpu:parameters()[i], e.param)
      t.truthy(err < 1e-6, ("%s %s: parameter rel err %.3g"):format(kind, e.name, err))
    end
  end
end)

t.case("bf16 AdamW on CUDA: f32 moments, close to the f32 update", function()
  local cpu, gpu = twin_models{layer = "mlp", dim = 64, depth = 1}
  gpu:to(nil, "bf16")
  local oc, og = optim.AdamW(cpu, {lr = 1e-3}), optim.AdamW(gpu, {lr = 1e-3})
  local ds = data.bytes(FIXTURE, {seq_len = 32, batch = 4, seed = 3})
  local x, y = ds:batch(0)
  cpu:loss(x, y):backward()
  gpu:loss(x:to("cuda"), y:to("cuda")):backward()
  t.eq(gpu.embed.weight:grad():dtype(), "bf16")
  oc:step()
  og:step()
  t.eq(og.state[1].exp_avg:dtype(), "f32")
  t.eq(og.state[1].exp_avg:device(), "cuda:0")
  for i, e in ipairs(cpu:named_parameters()) do
    local err = rel_err(gpu:parameters()[i], e.param)
    t.truthy(err < 1e-2, ("%s: bf16 parameter rel err %.3g"):format(e.name, err))
  end
end)

t.case("clip_grad_norm on CUDA: the CPU's norm and scaled gradients", function()
  local cpu, gpu = twin_models{layer = "mlp", dim = 64, depth = 2}
  local ds = data.bytes(FIXTURE, {seq_len = 32, batch = 4, seed = 5})
  local x, y = ds:batch(0)
  cpu:loss(x, y):backward()
  gpu:loss(x:to("cuda"), y:to("cuda")):backward()
  local nc = optim.clip_grad_norm(cpu, 0.01)
  local ng = optim.clip_grad_norm(gpu, 0.01)
  t.eq(ng:device(), "cuda:0")
  t.truthy(math.abs(ng:item() - nc:item()) < 1e-4 * nc:item(), "norms " .. nc:item() .. " " .. ng:item())
  for i, p in ipairs(cpu:parameters()) do
    local err = rel_err(gpu:parameters()[i]:grad(), p:grad())
    t.truthy(err < 1e-4, ("clipped gradient %d rel err %.3g"):format(i, err))
  end
end)

t.case("dropout masks on CUDA are the CPU's for a seed", function()
  local drop = nn.Dropout(0.3)
  local x = engine.randn{64, 33}
  engine.manual_seed(9)
  local a = drop(x)
  engine.manual_seed(9)
  local b = drop(x:to("cuda"))
  t.eq(b:cpu():ne(0):tolist(), a:ne(0):tolist())
  t.truthy(rel_err(b, a) < 1e-6, "values")
end)

t.case("bf16 training on CUDA learns the text; the checkpoint loads on the CPU", function()
  local f = assert(io.open(FIXTURE, "rb"))
  local s = f:read("*a")
  f:close()
  local counts, h = {}, 0
  for i = 1, #s do counts[s:byte(i)] = (counts[s:byte(i)] or 0) + 1 end
  for _, c in pairs(counts) do h = h - c / #s * math.log(c / #s) end
  engine.manual_seed(1)
  local model = models.ladder_lm{layer = "attention", dim = 128, depth = 2, device = "cuda"}
  local dir = t.tmpdir()
  local res = engine.train{model = model, data = FIXTURE, batch = 16, seq_len = 64, lr = 3e-3,
                           steps = 300, bf16 = true, out = dir, log_every = 50,
                           print = function() end}
  t.eq(model:dtype(), "bf16")
  t.eq(model:device(), "cuda:0")
  t.truthy(res.final_loss_last100 < h - 0.3,
           ("FINAL_LOSS_LAST100 %.4f vs unigram entropy %.4f"):format(res.final_loss_last100, h))
  local tensors = engine.load(dir .. "/checkpoint.safetensors")
  local sd = {}
  for name, v in pairs(tensors) do
    local rest = name:match("^model%.(.*)$")
    if rest then sd[rest] = v end
  end
  local cpu = models.ladder_lm{layer = "attention", dim = 128, depth = 2, dtype = "bf16"}
  cpu:load_state_dict(sd)
  local x = data.bytes(FIXTURE, {seq_len = 64, batch = 2, seed = 8}):batch(0)
  local err = rel_err(model(x:to("cuda")):float(), cpu(x):float())
  t.truthy(err < 2e-2, "CPU and CUDA logits of the checkpoint, rel err " .. err)
  os.execute("rm -rf '" .. dir .. "'")
end)

t.case("resume on CUDA continues the run", function()
  local function run(dir, steps, resume, seed)
    engine.manual_seed(seed)
    local model = models.ladder_lm{layer = "mlp", dim = 64, depth = 2, device = "cuda"}
    return engine.train{model = model, data = FIXTURE, batch = 8, seq_len = 32, lr = 3e-3,
                        steps = steps, schedule = optim.schedule.warmup_cosine{warmup = 5, total = 40},
                        out = dir, resume = resume, log_every = 10, print = function() end}
  end
  local a, b = t.tmpdir(), t.tmpdir()
  local full = run(a, 40, false, 7)
  run(b, 20, false, 7)
  local second = run(b, 40, true, 123)
  for s = 21, 40 do
    t.truthy(math.abs(second.losses[s] - full.losses[s]) < 1e-4 * full.losses[s],
             ("step %d: %.7f resumed, %.7f uninterrupted"):format(s, second.losses[s], full.losses[s]))
  end
  os.execute("rm -rf '" .. a .. "' '" .. b .. "'")
end)
