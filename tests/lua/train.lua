-- engine.train: a tiny ladder LM learns real text (beats its unigram entropy), a resumed run
-- gives exactly the losses of an uninterrupted one, NaN stops with the last good checkpoint, the
-- progress and summary lines.
local t = require "spec"
local engine = require "engine"
local models, nn, optim = engine.models, engine.nn, engine.optim

local FIXTURE = debug.getinfo(1, "S").source:match("^@(.*)/lua/[^/]*$") .. "/data/design.txt"

local function collector()
  local lines = {}
  return lines, function(s) lines[#lines + 1] = s end
end

-- The unigram entropy of the file's bytes, in nats.
local function unigram_entropy(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  local counts = {}
  for i = 1, #s do
    local b = s:byte(i)
    counts[b] = (counts[b] or 0) + 1
  end
  local h = 0
  for _, c in pairs(counts) do h = h - c / #s * math.log(c / #s) end
  return h
end

t.case("a tiny ladder LM trained on CPU beats the text's unigram entropy", function()
  engine.manual_seed(1)
  local model = models.ladder_lm{layer = "mlp", dim = 32, depth = 1, expansion = 2}
  local lines, out = collector()
  local res = engine.train{model = model, data = FIXTURE, batch = 8, seq_len = 32, lr = 2e-2,
                           steps = 150, warmup = 10, log_every = 50, print = out}
  local h = unigram_entropy(FIXTURE)
  t.truthy(h > 3 and h < 4, "unigram entropy " .. h)
  t.truthy(res.final_loss_last100 < h - 0.2,
           ("FINAL_LOSS_LAST100 %.4f should beat the unigram entropy %.4f"):format(res.final_loss_last100, h))
  t.eq(res.steps, 150)
  t.truthy(res.tokens_per_sec > 0, "tokens/s")
  t.truthy(lines[1]:match("^step 50/150 | loss %d+%.%d+ | lr [%d%.e%-]+ | %d+ tok/s | elapsed %S+ | ETA %S+$"),
           lines[1])
  local found
  for _, l in ipairs(lines) do found = found or l:match("^FINAL_LOSS_LAST100 (%S+)$") end
  t.near(tonumber(found), res.final_loss_last100, 1e-5)
end)

-- A ladder model whose mixer uses dropout, so that the generator state matters on resume.
models.register_mixer("mlp_dropout", function(dim, opts)
  return nn.Sequential(nn.SwiGLU(dim, 2 * dim, opts), nn.Dropout(0.1))
end)

local function resume_run(out_dir, steps, resume, init_seed)
  engine.manual_seed(init_seed)
  local model = models.ladder_lm{layer = "mlp_dropout", dim = 16, depth = 2}
  local _, quiet = collector()
  return engine.train{model = model, data = FIXTURE, batch = 4, seq_len = 16, lr = 3e-3, seed = 5,
                      steps = steps, schedule = optim.schedule.warmup_cosine{warmup = 3, total = 14},
                      out = out_dir, checkpoint_every = 5, resume = resume, log_every = 4,
                      print = quiet}
end

t.case("resume from a checkpoint gives the same losses as the uninterrupted run", function()
  local a_dir, b_dir = t.tmpdir(), t.tmpdir()
  local full = resume_run(a_dir, 14, false, 42)
  local first = resume_run(b_dir, 7, false, 42)  -- "killed" after step 7; checkpoint at 7
  for s = 1, 7 do t.eq(first.losses[s], full.losses[s], "step " .. s) end
  local _, meta = engine.load(b_dir .. "/checkpoint.safetensors")
  t.eq(meta.step, "7")
  local second = resume_run(b_dir, 14, true, 999) -- another init: everything comes from the file
  t.eq(second.steps_run, 7)
  for s = 8, 14 do t.eq(second.losses[s], full.losses[s], "step " .. s) end
  t.eq(second.final_loss_last100, full.final_loss_last100)
  t.rmdir(a_dir)
  t.rmdir(b_dir)
end)

t.case("a NaN loss stops training and keeps the last good checkpoint", function()
  local NaNAt = nn.Module:extend("NaNAt")
  function NaNAt:init(inner, at)
    self:add_module("inner", inner)
    self.at, self.calls = at, 0
  end
  function NaNAt:loss(x, y)
    self.calls = self.calls + 1
    local l = self.inner:loss(x, y)
    if self.calls >= self.at then l = l * (0 / 0) end
    return l
  end
  engine.manual_seed(3)
  local model = NaNAt(models.ladder_lm{layer = "mlp", dim = 8, depth = 1}, 6)
  local dir = t.tmpdir()
  local _, quiet = collector()
  local err = t.raises(function()
    engine.train{model = model, data = FIXTURE, batch = 2, seq_len = 8, steps = 20, lr = 1e-3,
                 out = dir, checkpoint_every = 4, log_every = 5, print = quiet}
  end, "loss is nan at step 6", "last good checkpoint", "(step 4)")
  t.truthy(err:find(dir, 1, true), err)
  local _, meta = engine.load(dir .. "/checkpoint.safetensors")
  t.eq(meta.step, "4")
  t.rmdir(dir)
end)

t.case("a time budget (minutes =) ends the run with a summary", function()
  engine.manual_seed(4)
  local model = models.ladder_lm{layer = "mlp", dim = 8, depth = 1}
  local lines, out = collector()
  local res = engine.train{model = model, data = FIXTURE, batch = 2, seq_len = 8, lr = 1e-3,
                           minutes = 0.005, optimizer = "schedule_free", log_every = 1e9,
                           print = out}
  t.truthy(res.steps >= 1 and res.seconds >= 0.3, ("%d steps in %.2f s"):format(res.steps, res.seconds))
  -- the one progress line of the last step, then the summary (log_every is beyond any step count
  -- reached in 0.3 s: a fast machine ran past step 1000, which printed a line of its own)
  t.eq(#lines, 4)
  t.truthy(lines[1]:match("^step %d+ | loss"), lines[1])
  t.truthy(lines[2]:match("^FINAL_LOSS_LAST100 %d"), lines[2])
end)

t.case("bad options are clear errors", function()
  local model = models.ladder_lm{layer = "mlp", dim = 8, depth = 1}
  t.raises(function() engine.train{model = model, data = FIXTURE, batch = 2, seq_len = 8} end,
           "exactly one of steps")
  t.raises(function() engine.train{model = model, data = FIXTURE, steps = 1} end,
           "batch and seq_len are required")
  t.raises(function() engine.train{model = model, data = FIXTURE, batch = 1, seq_len = 4, steps = 1,
                                   optimiser = "adamw"} end, "unknown option 'optimiser'")
  t.raises(function() engine.train{model = model, data = FIXTURE, batch = 1, seq_len = 4, steps = 1,
                                   optimizer = "lion", print = function() end} end,
           "unknown optimizer 'lion'")
  t.raises(function() engine.train{model = model, data = "/no/such/file", batch = 1, seq_len = 4,
                                   steps = 1} end, "cannot open")
end)
