-- engine.models: ladder_lm's structure (against a forward written out with F ops), parameter
-- counts against closed forms, attention against loops and causality, create_ladder_model's
-- depth rule, the mixer registry, and a 2-layer model's gradients against finite differences.
local t = require "spec"
local engine = require "engine"
local models, nn, F = engine.models, engine.nn, engine.F

local function ids(list) return engine.tensor(list, {dtype = "i64"}) end

t.case("ladder_lm: logits [B, T, 256], loss near log 256 at init", function()
  engine.manual_seed(1)
  local m = models.ladder_lm{layer = "mlp", dim = 16, depth = 2}
  local x = engine.randint(0, 256, {2, 5})
  local logits = m(x)
  t.eq(logits:shape(), {2, 5, 256})
  t.eq(logits:dtype(), "f32")
  t.eq(m:forward(x):tolist(), logits:tolist())
  local loss = m:loss(x, engine.randint(0, 256, {2, 5}))
  t.eq(loss:dim(), 0)
  t.truthy(math.abs(loss:item() - math.log(256)) < 0.05, "loss " .. loss:item())
end)

t.case("ladder_lm: pre-norm residual blocks, f32 stream, tied head (written out with F ops)", function()
  engine.manual_seed(2)
  local m = models.ladder_lm{layer = "mlp", dim = 8, depth = 3, expansion = 2}
  engine.no_grad(function()
    for _, e in ipairs(m:named_parameters()) do
      if e.name:find("norm") then e.param:copy_(engine.rand(e.param:shape()) + 0.5) end
    end
  end)
  local x = ids{{1, 2, 3, 250}, {7, 7, 0, 255}}
  local E = m.embed.weight
  local r = F.embedding(x, E)
  local h = r
  for i = 1, 3 do
    local b = m.blocks[tostring(i)]
    if i > 1 then r = r + h end
    h = b.mixer(F.rms_norm(r, b.norm.weight, 1e-6))
  end
  local ref = F.linear(F.rms_norm(r + h, m.norm.weight, 1e-6), E)
  t.truthy(m(x):allclose(ref, {rtol = 1e-5, atol = 1e-6}), "the model is the written-out forward")
  -- no separate output head: the logits use the embedding
  local n = m:num_parameters()
  t.eq(n, 256 * 8 + 3 * (8 + 3 * 8 * 16) + 8)
end)

t.case("parameter counts: closed forms for mlp and attention ladders", function()
  local d, depth = 24, 3
  local mlp = nn.without_init(function() return models.ladder_lm{layer = "mlp", dim = d, depth = depth, expansion = 1.5} end)
  t.eq(mlp:num_parameters(), 256 * d + depth * (d + 3 * d * 36) + d)
  local att = nn.without_init(function() return models.ladder_lm{layer = "attention", dim = d, depth = depth, n_heads = 3} end)
  t.eq(att:num_parameters(), 256 * d + depth * (d + 4 * d * d) + d)
  t.eq(#att:parameters(), 1 + depth * 3 + 1)
  local names = {}
  for i, e in ipairs(att:named_parameters()) do names[i] = e.name end
  t.eq({names[1], names[2], names[3], names[4], names[#names]},
       {"embed.weight", "blocks.1.norm.weight", "blocks.1.mixer.qkv.weight",
        "blocks.1.mixer.out.weight", "norm.weight"})
end)

-- causal softmax attention by loops: x [T][D], Wqkv [3D][D], Wo [D][D], H heads
local function attention_ref(X, Wqkv, Wo, H)
  local T, D = #X, #X[1]
  local hd = D / H
  local function proj(W, v, row0)
    local out = {}
    for o = 1, D do
      local s = 0
      for k = 1, D do s = s + W[row0 + o][k] * v[k] end
      out[o] = s
    end
    return out
  end
  local Q, K, V = {}, {}, {}
  for s = 1, T do Q[s], K[s], V[s] = proj(Wqkv, X[s], 0), proj(Wqkv, X[s], D), proj(Wqkv, X[s], 2 * D) end
  local Y = {}
  for s = 1, T do
    Y[s] = {}
    for h = 0, H - 1 do
      local scores, mx = {}, -math.huge
      for u = 1, s do
        local dot = 0
        for j = 1, hd do dot = dot + Q[s][h * hd + j] * K[u][h * hd + j] end
        scores[u] = dot / math.sqrt(hd)
        mx = math.max(mx, scores[u])
      end
      local z = 0
      for u = 1, s do scores[u] = math.exp(scores[u] - mx); z = z + scores[u] end
      for j = 1, hd do
        local acc = 0
        for u = 1, s do acc = acc + scores[u] / z * V[u][h * hd + j] end
        Y[s][h * hd + j] = acc
      end
    end
  end
  local out = {}
  for s = 1, T do
    out[s] = {}
    for o = 1, D do
      local acc = 0
      for k = 1, D do acc = acc + Wo[o][k] * Y[s][k] end
      out[s][o] = acc
    end
  end
  return out
end

t.case("attention mixer: causal multi-head softmax attention against loops", function()
  engine.manual_seed(3)
  local Attention = models.mixer("attention")
  local att = Attention(6, {n_heads = 2, std = 0.5, dtype = "f64"})
  local x, X = t.random_tensor(engine, {2, 4, 6}, 31, -1, 1, "f64")
  local got = att(x):tolist()
  for b = 1, 2 do
    t.near(got[b], attention_ref(X[b], att.qkv.weight:tolist(), att.out.weight:tolist(), 2), 1e-10)
  end
  t.raises(function() Attention(6, {n_heads = 4}) end, "n_heads (4) must divide dim (6)")
end)

t.case("attention ladder: changing a later token leaves earlier logits unchanged", function()
  engine.manual_seed(4)
  local m = models.ladder_lm{layer = "attention", dim = 16, depth = 2, n_heads = 2}
  local a = m(ids{{5, 6, 7, 8, 9}}):tolist()[1]
  local b = m(ids{{5, 6, 7, 200, 9}}):tolist()[1]
  for s = 1, 3 do t.eq(b[s], a[s], "position " .. s) end
  t.truthy(t.show(b[4]) ~= t.show(a[4]), "position 4 changes")
  t.truthy(t.show(b[5]) ~= t.show(a[5]), "position 5 sees it")
end)

t.case("bf16 model: bf16 logits, f32 loss", function()
  engine.manual_seed(5)
  local m = models.ladder_lm{layer = "mlp", dim = 16, depth = 2, dtype = "bf16"}
  t.eq(m:dtype(), "bf16")
  local x = engine.randint(0, 256, {2, 6})
  t.eq(m(x):dtype(), "bf16")
  local loss = m:loss(x, engine.randint(0, 256, {2, 6}))
  t.eq(loss:dtype(), "f32")
  t.truthy(math.abs(loss:item() - math.log(256)) < 0.1, "loss " .. loss:item())
end)

t.case("create_ladder_model: table entry, probe-measured depth, clamping, printed config", function()
  t.eq(models.parse_count("50M"), 50e6)
  t.eq(models.parse_count("1.3B"), 1.3e9)
  t.eq(models.parse_count(2e8), 2e8)
  t.raises(function() models.parse_count("lots") end, "bad parameter count 'lots'")
  local printed = {}
  local real_print = print
  print = function(s) printed[#printed + 1] = s end
  local ok, m, cfg = pcall(nn.without_init, models.create_ladder_model, "mlp", "50M")
  print = real_print
  assert(ok, m)
  local d, h = 512, 768
  local per_layer, base = d + 3 * d * h, 256 * d + d
  local depth = math.floor((50e6 - base) / per_layer + 0.5)
  t.eq({cfg.dim, cfg.expansion, cfg.depth, cfg.per_layer, cfg.base}, {d, 1.5, depth, per_layer, base})
  t.eq(m:num_parameters(), base + depth * per_layer)
  t.eq(cfg.params, m:num_parameters())
  t.truthy(printed[1]:find(("depth=%d -> %d parameters"):format(depth, cfg.params), 1, true), printed[1])
  -- the entry nearest by ratio: 75M -> 100M's 768/1.5; 380M -> 350M's 1024/2.0
  local _, c75 = nn.without_init(models.create_ladder_model, "mlp", "75M", {quiet = true})
  t.eq({c75.dim, c75.expansion}, {768, 1.5})
  local _, c380 = nn.without_init(models.create_ladder_model, "mlp", 380e6, {quiet = true})
  t.eq({c380.dim, c380.expansion}, {1024, 2.0})
  -- clamped to [4, 48]
  local _, small = nn.without_init(models.create_ladder_model, "mlp", "1M", {quiet = true})
  t.eq(small.depth, 4)
  models.register_mixer("scale_only", function(dim)
    local S = nn.Module:extend("ScaleOnly")
    function S:init() self:add_parameter("s", nn.parameter({dim}, {fill = 1})) end
    function S:forward(x) return x * self.s end
    return S()
  end)
  local big, cbig = models.create_ladder_model("scale_only", "1.3B", {quiet = true})
  t.eq({cbig.dim, cbig.depth}, {1792, 48})
  t.eq(big:num_parameters(), 256 * 1792 + 48 * 2 * 1792 + 1792)
end)

t.case("mixer registry: registered constructors, lazy files, unknown names", function()
  local got
  models.register_mixer("identity", function(dim, opts)
    got = opts.custom
    local I = nn.Module:extend("Identity")
    function I:forward(x) return x end
    return I()
  end)
  local m = models.ladder_lm{layer = "identity", dim = 8, depth = 2, custom = "seen"}
  t.eq(got, "seen")
  t.eq(m(ids{{1, 2}}):shape(), {1, 2, 256})
  local err = t.raises(function() models.ladder_lm{layer = "nope", dim = 8, depth = 1} end,
                       "unknown layer 'nope'")
  t.truthy(err:find("attention") and err:find("mlp") and err:find("identity"), err)
  t.raises(function() models.ladder_lm{layer = "mlp", dim = 8} end, "option 'depth' is required")
  t.raises(function() models.ladder_lm{layer = "mlp", dim = 8, depth = 1, vocab = 512} end, "vocab must be 256")
end)

-- d loss / d param at a few entries, by central differences in f64, against backward.
local function check_gradients(layer)
  engine.manual_seed(6)
  local m = models.ladder_lm{layer = layer, dim = 8, depth = 2, n_heads = 2, expansion = 1.5,
                             dtype = "f64"}
  engine.no_grad(function()
    for _, e in ipairs(m:named_parameters()) do
      e.param:copy_(e.param + engine.randn(e.param:shape(), {dtype = "f64"}) * 0.3)
    end
  end)
  local x = ids{{3, 1, 4, 1, 5}, {9, 2, 6, 5, 3}}
  local y = ids{{1, 4, 1, 5, 9}, {2, 6, 5, 3, 5}}
  m:zero_grad()
  m:loss(x, y):backward()
  local eps, worst = 1e-5, 0
  for _, e in ipairs(m:named_parameters()) do
    local p = e.param
    local grad = p:grad()
    t.truthy(grad ~= nil, e.name .. " has a gradient")
    local flat_p, flat_g = p:view(-1), grad:reshape(-1)
    local n = p:numel()
    for _, i in ipairs({0, math.floor(n / 3), math.floor(2 * n / 3), n - 1}) do
      local v = flat_p:get(i)
      local function loss_at(w)
        engine.no_grad(function() flat_p:set(i, w) end)
        return engine.no_grad(function() return m:loss(x, y):item() end)
      end
      local fd = (loss_at(v + eps) - loss_at(v - eps)) / (2 * eps)
      loss_at(v)
      local an = flat_g:get(i)
      local err = math.abs(fd - an) / math.max(1e-3, math.abs(fd))
      worst = math.max(worst, err)
      t.truthy(err < 1e-5, ("%s[%d]: backward %.10g, finite differences %.10g"):format(e.name, i, an, fd))
    end
  end
  return worst
end

t.case("2-layer mlp ladder: gradients match central differences (f64)", function()
  check_gradients("mlp")
end)

t.case("2-layer attention ladder: gradients match central differences (f64)", function()
  check_gradients("attention")
end)
