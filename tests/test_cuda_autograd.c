/* Autograd on the GPU: the same graph of ops on CUDA gives the CPU's gradients (f32 and bf16).
 * The formulas are shared by both devices; this checks the backward kernels they run on CUDA
 * (fused norm/softmax/cross-entropy backward, index_add, scatter_add) and the device handling of
 * the engine (seeds, accumulation, dtype conversion at the edges). Skips without a GPU. */
#include <string.h>

#include "support.h"

static const char *model =
    "local F = engine.F\n"
    "engine.manual_seed(11)\n"
    "local V, D, B, T = 50, 24, 3, 7\n"
    "local params = {\n"
    "  emb = engine.randn({V, D}) * 0.5, w1 = engine.randn({2 * D, D}) * 0.2, b1 = engine.randn({2 * D}) * 0.1,\n"
    "  g1 = engine.rand({D}) + 0.5, g2 = engine.rand({2 * D}) + 0.5, b2 = engine.randn({2 * D}) * 0.1,\n"
    "  w2 = engine.randn({V, D}) * 0.2, mix = engine.randn({T, T}) * 0.3,\n"
    "}\n"
    "local ids = engine.randint(0, V, {B, T})\n"
    "local targets = engine.randint(0, V, {B, T})\n"
    "targets:set(1, 2, -100)\n"
    "local function loss_on(device, dtype)\n"
    "  local p = {}\n"
    "  for k, v in pairs(params) do p[k] = v:to({device = device, dtype = dtype}):detach():requires_grad(true) end\n"
    "  local id, tg = ids:to(device), targets:to(device)\n"
    "  local x = F.embedding(id, p.emb)\n"
    "  x = F.rms_norm(x, p.g1, 1e-5)\n"
    "  local h = F.linear(x, p.w1, p.b1, {act = 'gelu'})\n"
    "  h = F.layer_norm(h, p.g2, p.b2, 1e-5)\n"
    "  local a, b = h:chunk(2, -1)[1], h:chunk(2, -1)[2]\n"
    "  x = a:silu() * b:sigmoid() + x:tanh()\n"
    "  local att = (p.mix:softmax(-1)):matmul(x)\n"
    "  x = engine.cat({att:narrow(2, 0, D / 2), x:narrow(2, D / 2, D / 2)}, 2)\n"
    "  local logits = F.linear(x, p.w2)\n"
    "  local extra = logits:log_softmax(-1):max(-1):mean() * 0.1 + x:var(-1):mean() * 0.1\n"
    "  local picked = logits:gather(2, tg:clamp(0, V - 1):unsqueeze(-1)):mean() * 0.01\n"
    "  local sel = p.emb:index_select(0, id:reshape(-1)):pow(2):mean()\n"
    "  local loss = F.cross_entropy(logits, tg) + extra + picked + sel\n"
    "  loss:backward()\n"
    "  local g = {}\n"
    "  for k, v in pairs(p) do g[k] = v:grad():to({device = 'cpu', dtype = 'f64'}) end\n"
    "  return loss:to({device = 'cpu', dtype = 'f64'}):item(), g\n"
    "end\n"
    "local function rel(a, b)\n"
    "  local d = (a - b):pow(2):sum():sqrt():item()\n"
    "  return d / math.max(b:pow(2):sum():sqrt():item(), 1e-30)\n"
    "end\n"
    "function compare(dtype, tol) -- global: the next chunks call it\n"
    "  local lc, gc = loss_on('cpu', 'f32')\n"
    "  local lg, gg = loss_on('cuda', dtype)\n"
    "  assert(math.abs(lc - lg) <= tol * math.abs(lc), dtype .. ' loss ' .. lg .. ' vs ' .. lc)\n"
    "  for k, v in pairs(gc) do\n"
    "    local e = rel(gg[k], v)\n"
    "    assert(e < tol, dtype .. ' grad of ' .. k .. ': relative error ' .. e)\n"
    "    assert(v:abs():sum():item() > 0, 'grad of ' .. k .. ' is zero: the test would prove nothing')\n"
    "  end\n"
    "end\n";

Test(cuda_autograd, gradients_on_the_gpu_match_the_cpu) {
  if (eng_cuda_device_count() == 0) cr_skip_test("no CUDA GPU");
  eng_engine_t *e = eng_engine_new();
  cr_assert(e != NULL);
  cr_assert(eng_engine_run_string(e, model, "model") == 0, "%s", eng_engine_last_error(e));
  cr_assert(eng_engine_run_string(e, "compare('f32', 1e-4)", "f32") == 0, "%s", eng_engine_last_error(e));
  cr_assert(eng_engine_run_string(e, "compare('bf16', 5e-2)", "bf16") == 0, "%s", eng_engine_last_error(e));
  eng_engine_free(e);
}

Test(cuda_autograd, leaf_gradients_stay_on_the_gpu_and_accumulate) {
  if (eng_cuda_device_count() == 0) cr_skip_test("no CUDA GPU");
  eng_engine_t *e = eng_engine_new();
  cr_assert(e != NULL);
  const char *code =
      "local x = engine.tensor({1, 2, 3}):to('cuda'):requires_grad(true)\n"
      "local y = (x * x):sum()\n"
      "y:backward()\n"
      "assert(x:grad():device() == 'cuda:0')\n"
      "local z = (x * 3):sum()\n"
      "z:backward()\n"
      "local g = x:grad():cpu():tolist()\n"
      "assert(g[1] == 5 and g[2] == 7 and g[3] == 9, table.concat(g, ','))\n";
  cr_assert(eng_engine_run_string(e, code, "accumulate") == 0, "%s", eng_engine_last_error(e));
  eng_engine_free(e);
}
