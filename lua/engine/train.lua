-- engine.train: the training loop of language models (engine.models) over engine.data datasets.
--
-- Step s (from 1) trains on batch s - 1 of the dataset, so the data stream is a function of the
-- step and a resumed run sees the same batches. Losses stay on the device and are read back in
-- one transfer every log_every steps (and before each checkpoint), where they are checked for
-- NaN/Inf: a checkpoint is only written after every loss before it was seen to be finite.
local engine = require "engine"
local doc = engine.doc

local OPTIONS = {
  model = true, data = true, batch = true, seq_len = true, seed = true, lr = true, steps = true,
  minutes = true, optimizer = true, schedule = true, warmup = true, min_ratio = true,
  weight_decay = true, betas = true, clip = true, out = true, checkpoint_every = true,
  resume = true, log_every = true, bf16 = true, device = true, print = true,
}

local function fmt_time(s)
  if s ~= s or s == math.huge then return "?" end
  s = math.floor(s + 0.5)
  if s >= 3600 then return ("%dh%02dm"):format(s / 3600, s % 3600 / 60) end
  if s >= 60 then return ("%dm%02ds"):format(s / 60, s % 60) end
  return ("%ds"):format(s)
end

local function num(v) return ("%.17g"):format(v) end

local CHECKPOINT = "checkpoint.safetensors"

local function checkpoint_path(cfg)
  if type(cfg.resume) == "string" then return cfg.resume end
  return cfg.out and (cfg.out .. "/" .. CHECKPOINT)
end

-- The optimizer: an object, or a name built over the model's parameter groups.
local function make_optimizer(cfg, model)
  local o = cfg.optimizer or "adamw"
  if type(o) == "table" then return o end
  local optim = engine.optim
  if o == "adamw" then
    return optim.AdamW(model, {lr = cfg.lr, betas = cfg.betas or {0.9, 0.95},
                               weight_decay = cfg.weight_decay or 0.01})
  elseif o == "schedule_free" then
    return optim.ScheduleFreeAdamW(model, {lr = cfg.lr, betas = cfg.betas or {0.9, 0.95},
                                           weight_decay = cfg.weight_decay or 0.01,
                                           warmup = cfg.warmup or 0})
  elseif o == "sgd" then
    return optim.SGD(model, {lr = cfg.lr, weight_decay = cfg.weight_decay or 0})
  end
  error("train: unknown optimizer '" .. tostring(o) .. "' (adamw, schedule_free, sgd, or an object)", 3)
end

-- The lr multiplier as a function (step, progress).
local function make_schedule(cfg, opt)
  local s = cfg.schedule
  if type(s) == "function" then return s end
  local sched = engine.optim.schedule
  local warmup = cfg.warmup
  if warmup == nil then
    warmup = cfg.steps and math.min(100, math.floor(cfg.steps / 10)) or 100
  end
  if opt.kind == "ScheduleFreeAdamW" then warmup = 0 end -- it warms up itself
  if s == nil or s == "cosine" then
    return sched.warmup_cosine{warmup = warmup, total = cfg.steps, min_ratio = cfg.min_ratio or 0.1}
  elseif s == "constant" then
    return sched.constant{warmup = warmup}
  end
  error("train: unknown schedule '" .. tostring(s) .. "' (cosine, constant, or a function)", 3)
end

local function save_checkpoint(path, step, model, opt, ds, history, stats)
  local tensors = {}
  for name, t in pairs(model:state_dict()) do tensors["model." .. name] = t end
  local ot, om = opt:state_dict()
  for name, t in pairs(ot) do tensors["optim." .. name] = t end
  local rng = engine.rng_state()
  local meta = {step = ("%d"):format(step), rng_seed = num(rng.seed), rng_offset = num(rng.offset),
                data_seed = num(ds.seed), tokens = num(stats.tokens), seconds = num(stats.seconds)}
  for k, v in pairs(om) do meta["optim." .. k] = v end
  local recent = {}
  for i = math.max(1, #history - 99), #history do recent[#recent + 1] = num(history[i]) end
  meta.recent_losses = table.concat(recent, ",")
  engine.save(path, tensors, meta)
end

local function load_checkpoint(path, model, opt, ds)
  local tensors, meta = engine.load(path)
  local mt, ot, om = {}, {}, {}
  for name, t in pairs(tensors) do
    local m, rest = name:match("^(%a+)%.(.*)$")
    if m == "model" then mt[rest] = t elseif m == "optim" then ot[rest] = t end
  end
  for k, v in pairs(meta) do
    local rest = k:match("^optim%.(.*)$")
    if rest then om[rest] = v end
  end
  if tonumber(meta.data_seed) ~= ds.seed then
    error(("train: the checkpoint %s was trained with data seed %s, this dataset has seed %d"):format(
      path, meta.data_seed, ds.seed), 3)
  end
  model:load_state_dict(mt)
  opt:load_state_dict(ot, om)
  engine.set_rng_state{seed = tonumber(meta.rng_seed), offset = tonumber(meta.rng_offset)}
  local history = {}
  for v in (meta.recent_losses or ""):gmatch("[^,]+") do history[#history + 1] = tonumber(v) end
  return tonumber(meta.step), history, {tokens = tonumber(meta.tokens) or 0,
                                        seconds = tonumber(meta.seconds) or 0}
end

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function train(cfg)
  if type(cfg) ~= "table" then error("train: expected an options table {model =, data =, ...}", 2) end
  for k in pairs(cfg) do
    if not OPTIONS[k] then error("train: unknown option '" .. tostring(k) .. "'", 2) end
  end
  local model = cfg.model
  if type(model) ~= "table" or not model.loss then
    error("train: option model must be a module with a loss(inputs, targets) method", 2)
  end
  if (cfg.steps == nil) == (cfg.minutes == nil) then
    error("train: give exactly one of steps = N and minutes = M", 2)
  end
  if cfg.steps and (type(cfg.steps) ~= "number" or cfg.steps < 1) then
    error("train: steps must be a positive integer, got " .. tostring(cfg.steps), 2)
  end
  local out = cfg.print or print
  local device = cfg.device or model:device() or engine.device()
  if type(cfg.optimizer) == "table" and (cfg.bf16 and model:dtype() ~= "bf16") then
    error("train: bf16 = true converts the model, which an optimizer made before would not see; "
          .. "convert the model (model:to(nil, \"bf16\")) before making the optimizer", 2)
  end
  if cfg.bf16 then model:to(device, "bf16") else model:to(device) end

  local ds = cfg.data
  if type(ds) == "string" then
    if not cfg.batch or not cfg.seq_len then
      error("train: with data = a path, batch and seq_len are required", 2)
    end
    ds = engine.data.bytes(ds, {seq_len = cfg.seq_len, batch = cfg.batch, seed = cfg.seed or 0,
                                device = device})
  elseif type(ds) ~= "table" or not ds.batch then
    error("train: option data must be a path or an engine.data dataset", 2)
  end
  local tokens_per_step = ds.batch_size * ds.seq_len

  local opt = make_optimizer(cfg, model)
  local schedule = make_schedule(cfg, opt)
  local ckpt = checkpoint_path(cfg)
  if cfg.out then os.execute("mkdir -p '" .. cfg.out:gsub("'", "'\\''") .. "'") end

  local start, history, stats = 0, {}, {tokens = 0, seconds = 0}
  if cfg.resume then
    if not ckpt then error("train: resume needs out = DIR (or resume = a checkpoint path)", 2) end
    if file_exists(ckpt) then
      start, history, stats = load_checkpoint(ckpt, model, opt, ds)
      out(("train: resumed from %s at step %d"):format(ckpt, start))
    elseif type(cfg.resume) == "string" then
      error("train: no checkpoint at " .. ckpt, 2)
    else
      out("train: no checkpoint in " .. cfg.out .. "; starting from step 0")
    end
  end

  local log_every = cfg.log_every or 10
  local every = cfg.checkpoint_every
  local budget = cfg.minutes and cfg.minutes * 60
  local total = cfg.steps
  local clip = cfg.clip == nil and 1.0 or cfg.clip
  local params = model:parameters()
  model:train()
  if opt.train then opt:train() end

  local pending, pending_first = {}, start + 1 -- device losses of steps not yet read back
  local losses = {}                            -- step -> loss, for the steps run now
  local last_good = nil                        -- step of the last checkpoint written
  local t0 = engine.clock()
  local t_log, step_log = t0, start
  local step = start

  -- Reads the pending losses (one transfer), checks them and records them.
  local function flush()
    if #pending == 0 then return end
    local vals = engine.stack(pending):cpu():tolist()
    for i, v in ipairs(vals) do
      local s = pending_first + i - 1
      if v ~= v or v == math.huge or v == -math.huge then
        local where = last_good and ("the last good checkpoint is %s (step %d)"):format(ckpt, last_good)
                      or (ckpt and file_exists(ckpt) and ("the checkpoint %s was left as it was"):format(ckpt))
                      or "no checkpoint was written"
        error(("train: loss is %s at step %d; stopped (%s)"):format(tostring(v), s, where), 0)
      end
      losses[s] = v
      history[#history + 1] = v
    end
    pending, pending_first = {}, pending_first + #vals
  end

  -- Batches come log_every steps at a time (at most 64 MiB): a host-to-device copy waits for the
  -- device, so this keeps the loop to one wait per log line. Datasets without windows() give
  -- one batch at a time.
  local block, block_first, block_n = nil, 0, 0
  local per_block = math.max(1, math.min(log_every, math.floor(64 * 2 ^ 20 /
                    (ds.batch_size * (ds.seq_len + 1) * 8))))
  local function next_batch(k)
    if not ds.windows then return ds:batch(k) end
    if not block or k >= block_first + block_n then
      block_first = k
      block_n = math.min(per_block, log_every - k % log_every) -- up to the next log line
      if total then block_n = math.min(block_n, total - k) end
      block = ds:windows(block_first, block_n)
    end
    return ds:split(block:select(0, k - block_first))
  end

  local function progress()
    local now = engine.clock()
    return budget and math.min(1, (now - t0) / budget) or (step / total)
  end

  -- is_last decides both the last progress line and the end of the loop: checking the clock a
  -- second time at the top could stop the loop after a step that printed no line.
  local done = total and step >= total
  while not done do
    step = step + 1
    opt:set_lr_scale(schedule(step, budget and progress() or nil))
    local inputs, targets = next_batch(step - 1)
    local loss = model:loss(inputs, targets)
    opt:zero_grad()
    loss:backward()
    if clip then engine.optim.clip_grad_norm(params, clip) end
    opt:step()
    pending[#pending + 1] = loss:detach()

    local is_last = (total and step >= total) or (budget and engine.clock() - t0 >= budget)
    local do_ckpt = ckpt and cfg.out and ((every and step % every == 0) or is_last)
    if step % log_every == 0 or is_last or do_ckpt then
      local n_new = #pending
      flush()
      if n_new > 0 and (step % log_every == 0 or is_last) then
        local now = engine.clock()
        local sum = 0
        for s = step - n_new + 1, step do sum = sum + losses[s] end
        local tps = (step - step_log) * tokens_per_step / math.max(now - t_log, 1e-9)
        local elapsed = now - t0
        local eta = budget and (budget - elapsed) or (elapsed / (step - start) * (total - step))
        out(("step %d%s | loss %.4f | lr %.3g | %.0f tok/s | elapsed %s | ETA %s"):format(
          step, total and ("/" .. total) or "", sum / n_new, opt:lr(), tps, fmt_time(elapsed),
          fmt_time(eta)))
        t_log, step_log = now, step
      end
    end
    if do_ckpt then
      local now = engine.clock()
      save_checkpoint(ckpt, step, model, opt, ds, history,
                      {tokens = stats.tokens + (step - start) * tokens_per_step,
                       seconds = stats.seconds + (now - t0)})
      last_good = step
    end
    done = is_last
  end
  flush()

  local seconds = engine.clock() - t0
  local n = #history
  local sum, count = 0, 0
  for i = math.max(1, n - 99), n do sum, count = sum + history[i], count + 1 end
  local summary = {
    steps = step, steps_run = step - start, losses = losses,
    final_loss_last100 = count > 0 and sum / count or nil,
    tokens_per_sec = (step - start) * tokens_per_step / math.max(seconds, 1e-9),
    seconds = seconds, checkpoint = last_good and ckpt or nil, optimizer = opt,
  }
  out(("FINAL_LOSS_LAST100 %.6f"):format(summary.final_loss_last100 or 0 / 0))
  out(("TOKENS_PER_SEC %.0f"):format(summary.tokens_per_sec))
  out(("train: %d steps (%d this run) in %s%s"):format(step, step - start, fmt_time(seconds),
      last_good and (", checkpoint " .. ckpt) or ""))
  return summary
end

local M = setmetatable({}, {__call = function(_, cfg) return train(cfg) end})
doc(M, [[engine.train{model =, data =, steps = N | minutes = M, ...} -> summary

Trains model (a module with loss(inputs, targets)) on data (an engine.data dataset, or a path:
then data.bytes with batch =, seq_len =, seed = 0 on the device). Options: lr (1e-3), optimizer
("adamw" (default, betas {0.9, 0.95}, weight_decay 0.01, no decay on norms/biases),
"schedule_free", "sgd", or an optimizer object), schedule ("cosine" (default: warmup then cosine
to min_ratio 0.1), "constant", or fn(step, progress)), warmup (min(100, steps/10)), clip (1.0;
false: none), bf16 (bf16 weights and activations; optimizer state, reductions and the residual
stream stay f32), device (the model's), out (a directory: checkpoints go to
out/checkpoint.safetensors, written atomically), checkpoint_every (steps; a checkpoint is also
written at the end), resume (true: continue from out's checkpoint when there is one; or a
checkpoint path), log_every (10), print (the function progress lines go to).
Each log line: step, mean loss since the last line, lr, tokens/s, elapsed, ETA. A NaN/Inf loss
stops with an error naming the step and the last good checkpoint. At the end it prints
FINAL_LOSS_LAST100 (mean of the last 100 losses, nats per byte) and TOKENS_PER_SEC. summary:
{steps, steps_run, losses (step -> loss), final_loss_last100, tokens_per_sec, seconds,
checkpoint, optimizer}. A resumed run (same model, data and options) gives the losses the
uninterrupted run would have (time-budgeted runs excepted: their schedule follows the clock).]])
return M
