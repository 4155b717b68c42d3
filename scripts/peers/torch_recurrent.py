#!/usr/bin/env python3
"""PyTorch eager peer of scripts/bench/recurrent.lua: E88, E1 and E23 at its case names and shapes.

    python3 scripts/peers/torch_recurrent.py [--out torch_recurrent.json] [--quick] [--only NAME]
                                             [--no-check] [--require-cuda] [--cpu] [--tf32]

Each layer is written the way a PyTorch user writes it: a Python loop over the T time steps, each
step a few batched ops (vectorized over the batch, and over the heads for E88), and autograd for
the backward. What does not depend on the state is done once for the whole sequence outside the
loop (E88's L2 normalization of q and k, the silu gates, E1/E23's xw + b, the time-major copies);
the per-step slices come from unbind (its backward is one stack, where x[:, t] in a loop would
scatter into a full-size zero tensor every step). E23's write is torch.lerp (one kernel).

  E88  per (b, h), S in R^{n x v}: k^ = k/(|k|+1e-6), q^ = q/(|q|+1e-6); delta = v - S^T k^;
       S <- tanh(decay * S + k^ delta^T); o = S^T q^ (new S); y = o * silu(g).
       Per step: baddbmm (delta), mul (decay * S), baddbmm (outer product), tanh, bmm (o).
  E1   h_t = tanh(xw_t + h_{t-1} W_h^T + b); y_t = h_t * silu(z_t). Per step: addmm, tanh.
  E23  tape H [B,N,d], scale = 1/sqrt(d): r = softmax(H h_{t-1} scale); read = r^T H;
       h_t = tanh(h_{t-1} W_h^T + xw_t + read + b); w = h_t W_write^T;
       a = softmax(H h_t scale) (the tape before this step's write); H <- (1 - a) H + a w^T.
       Per step: bmm, mul, softmax, bmm, addmm, add, tanh, mm, bmm, mul, softmax, lerp.

Precision: the inputs are bf16 leaves on the GPU (random, never zeros, scaled as recurrent.lua's
runners scale them). Each layer call first makes f32 copies of its whole bf16 sequences and
weights (one cast per tensor per call, inside the timed call; the casts' backward is in the
backward time); the state and every per-step op, matmuls included, run in f32 (torch's default
f32 matmul, no TF32 unless --tf32); the outputs are cast to bf16 at the end. E88's initial state
S0 and E23's tape0 are f32 (S0 random; recurrent.lua passes zeros, which costs the same).

Timing (as recurrent.lua): forward = one whole layer call (all T steps) under torch.no_grad(),
CUDA events around it; backward = torch.autograd.backward(outputs, dy) alone with a random bf16 dy,
CUDA events around it, after an untimed forward with grad that builds the graph (then a
synchronize, so the backward's own launch cost is counted). Medians over repeats after warm-up:
2 warm-ups and 5 repeats (--quick: 1 and 2). The first warm-up is also timed on the host clock;
a case whose remaining warm-ups and repeats would take more than its share of the time budget
(at most 60 s a case, 240 s in all) runs fewer repeats (at least 1): the line says so and the
JSON's "reps" says how many ran. Without CUDA (or with --cpu) it runs the self-check and
recurrent.lua's tiny cpu rows on the CPU with f32 inputs and the host clock: a smoke run only.

Self-check (first, unless --no-check): at a tiny f64 CPU size each layer is compared, outputs,
final state and the gradients of every input, against an independent formulation (a plain loop
over batch, head/slot and step with matrix-vector products and an explicit softmax); and on the
GPU the bf16 layer against the f64 one. It stops the script (exit 1) if they differ.

JSON, keyed by recurrent.lua's case names:
    {"meta": {"torch", "cuda", "device", "date", "quick", "reps", "warmup", "tf32", "precision",
              "check", "failures", "total_s", ...},
     "order": [names],
     "cases": {name: {"fwd_us": t, "bwd_us": t, "what": ..., "shape": ..., "T": steps,
                      "fwd_step_us", "bwd_step_us", "reps", "warmup", "graph_peak_bytes"}}}
A failed case has "fwd_us"/"bwd_us" null (whichever did not finish) and an "error" string.
"""
import argparse
import datetime
import math
import statistics
import sys
import time
import traceback

import peer_results  # beside this script

# recurrent.lua's `cases` (names and shapes must match it); cpu rows run only without CUDA.
CASES = [
    dict(name="e88 layer", kind="e88", B=8, T=512, H=83, n=32, v=32),
    dict(name="e88 B=16", kind="e88", B=16, T=512, H=83, n=32, v=32),
    dict(name="e88 T=2048", kind="e88", B=8, T=2048, H=83, n=32, v=32),
    dict(name="e88 n=v=64", kind="e88", B=8, T=512, H=41, n=64, v=64),
    dict(name="e88 tiny (cpu)", kind="e88", B=1, T=32, H=2, n=16, v=16, cpu=True),
    dict(name="e1 B4 d512", kind="e1", B=4, T=512, d=512),
    dict(name="e1 B4 d768", kind="e1", B=4, T=512, d=768),
    dict(name="e1 B64 d512", kind="e1", B=64, T=512, d=512),
    dict(name="e1 B64 d768", kind="e1", B=64, T=512, d=768),
    dict(name="e1 tiny (cpu)", kind="e1", B=2, T=32, d=32, cpu=True),
    dict(name="e23 B4 N8", kind="e23", B=4, T=512, d=512, N=8),
    dict(name="e23 B4 N64", kind="e23", B=4, T=512, d=512, N=64),
    dict(name="e23 B64 N8", kind="e23", B=64, T=512, d=512, N=8),
    dict(name="e23 B64 N64", kind="e23", B=64, T=512, d=512, N=64),
    dict(name="e23 tiny (cpu)", kind="e23", B=2, T=32, d=32, N=8, cpu=True),
]

CASE_BUDGET_S, TOTAL_BUDGET_S = 60.0, 240.0
# A priori guess of one iteration (forward + forward with grad + backward) per time step, in us:
# eager PyTorch is launch-bound here, ~5-10 us a kernel from Python. Only for the printed estimate.
GUESS_STEP_US = {"e88": 170.0, "e1": 80.0, "e23": 450.0}

torch = None  # imported in main(), so that a missing torch gives a clear message
F = None

WHAT = {
    "e88": "E88 eager: Python loop over T, per step baddbmm, mul, baddbmm, tanh, bmm over B*H; "
           "f32 state and math, bf16 in/out (f32 on the CPU); autograd backward",
    "e1": "E1 eager: Python loop over T, per step addmm + tanh; f32 state and math, bf16 in/out "
          "(f32 on the CPU); autograd backward",
    "e23": "E23 eager: Python loop over T, per step 2 tape reads (bmm, softmax, bmm), addmm, tanh, "
           "mm, lerp write; f32 state and math, bf16 in/out (f32 on the CPU); autograd backward",
}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--quick", action="store_true", help="1 warm-up, 2 repeats (a smoke run)")
    ap.add_argument("--only", metavar="NAME", help="only the cases whose name contains NAME")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness self-check")
    ap.add_argument("--require-cuda", action="store_true",
                    help="fail (exit 1) without CUDA instead of running the CPU smoke rows")
    ap.add_argument("--cpu", action="store_true", help="run the CPU smoke rows even with CUDA")
    ap.add_argument("--tf32", action="store_true",
                    help="allow TF32 in the f32 matmuls (default: torch's default, full f32)")
    return ap.parse_args()


# ---------------- the layers (step loops) ----------------
# acc: the dtype of the state and the per-step math; out: the dtype of the outputs.

def e88_layer(q, k, v, decay, g, S0, acc, out):
    """q, k [B,T,H,n]; v, g [B,T,H,v]; decay [B,T,H]; S0 [B,H,n,v]. Returns y [B,T,H,v], S_T."""
    B, T, H, n = q.shape
    V = v.shape[-1]
    qf, kf = q.to(acc), k.to(acc)
    qh = qf / (torch.linalg.vector_norm(qf, dim=-1, keepdim=True) + 1e-6)
    kh = kf / (torch.linalg.vector_norm(kf, dim=-1, keepdim=True) + 1e-6)

    def steps(x):  # [B,T,H,...] -> T contiguous slices [B*H, ...]
        return x.transpose(0, 1).reshape((T, B * H) + tuple(x.shape[3:])).unbind(0)

    qs, ks, vs, ds = steps(qh), steps(kh), steps(v.to(acc)), steps(decay.to(acc))
    S = S0.to(acc).reshape(B * H, n, V)
    outs = []
    for t in range(T):
        kt = ks[t].unsqueeze(1)                                      # [BH,1,n]
        delta = torch.baddbmm(vs[t].unsqueeze(1), kt, S, alpha=-1)   # v - S^T k^    [BH,1,v]
        S = torch.tanh(torch.baddbmm(ds[t][:, None, None] * S, kt.transpose(1, 2), delta))
        outs.append(torch.bmm(qs[t].unsqueeze(1), S))                # S^T q^        [BH,1,v]
    o = torch.cat(outs, 1).view(B, H, T, V).permute(0, 2, 1, 3)      # [B,T,H,v]
    y = (o * F.silu(g.to(acc))).to(out)
    return y, S.view(B, H, n, V)


def e1_layer(xw, z, W, b, h0, acc, out):
    """xw, z [B,T,d]; W [d,d]; b [d]; h0 [B,d]. Returns y [B,T,d], h_T."""
    xs = (xw.to(acc) + b.to(acc)).unbind(1)
    WT = W.to(acc).t()
    h = h0.to(acc)
    hs = []
    for x in xs:
        h = torch.tanh(torch.addmm(x, h, WT))
        hs.append(h)
    y = (torch.stack(hs, 1) * F.silu(z.to(acc))).to(out)
    return y, h


def e23_layer(xw, Wh, Ww, b, h0, tape0, acc, out):
    """xw [B,T,d]; Wh, Ww [d,d]; b [d]; h0 [B,d]; tape0 [B,N,d]. Returns hs [B,T,d], h_T, tape_T."""
    d = xw.shape[-1]
    scale = 1.0 / math.sqrt(d)
    xs = (xw.to(acc) + b.to(acc)).unbind(1)
    WhT, WwT = Wh.to(acc).t(), Ww.to(acc).t()
    h, tape = h0.to(acc), tape0.to(acc)
    hs = []
    for x in xs:
        r = torch.softmax(torch.bmm(tape, h.unsqueeze(2)).squeeze(2) * scale, dim=-1)   # [B,N]
        read = torch.bmm(r.unsqueeze(1), tape).squeeze(1)                               # [B,d]
        h = torch.tanh(torch.addmm(x, h, WhT) + read)
        w = torch.mm(h, WwT)
        a = torch.softmax(torch.bmm(tape, h.unsqueeze(2)).squeeze(2) * scale, dim=-1)
        tape = torch.lerp(tape, w.unsqueeze(1), a.unsqueeze(2))    # (1 - a_i) H_i + a_i w
        hs.append(h)
    return torch.stack(hs, 1).to(out), h, tape


# ---------------- independent formulations (self-check only) ----------------

def e88_ref(q, k, v, decay, g, S0):
    B, T, H, _ = q.shape
    ys, Ss = [], []
    for b in range(B):
        yb, Sb = [], []
        for hh in range(H):
            S = S0[b, hh]
            yh = []
            for t in range(T):
                kk, qq = k[b, t, hh], q[b, t, hh]
                kk = kk / (torch.sqrt(torch.dot(kk, kk)) + 1e-6)
                qq = qq / (torch.sqrt(torch.dot(qq, qq)) + 1e-6)
                delta = v[b, t, hh] - torch.mv(S.t(), kk)
                S = torch.tanh(decay[b, t, hh] * S + torch.outer(kk, delta))
                gg = g[b, t, hh]
                yh.append(torch.mv(S.t(), qq) * gg * torch.sigmoid(gg))
            yb.append(torch.stack(yh))          # [T,v]
            Sb.append(S)
        ys.append(torch.stack(yb, 1))           # [T,H,v]
        Ss.append(torch.stack(Sb))
    return torch.stack(ys), torch.stack(Ss)


def e1_ref(xw, z, W, b, h0):
    B, T, _ = xw.shape
    ys, hT = [], []
    for i in range(B):
        h, yi = h0[i], []
        for t in range(T):
            h = torch.tanh(xw[i, t] + torch.mv(W, h) + b)
            yi.append(h * z[i, t] * torch.sigmoid(z[i, t]))
        ys.append(torch.stack(yi))
        hT.append(h)
    return torch.stack(ys), torch.stack(hT)


def softmax_ref(s):
    e = torch.exp(s - s.max())
    return e / e.sum()


def e23_ref(xw, Wh, Ww, b, h0, tape0):
    B, T, d = xw.shape
    N = tape0.shape[1]
    scale = 1.0 / math.sqrt(d)
    ys, hT, tT = [], [], []
    for i in range(B):
        h, rows, yi = h0[i], [tape0[i, j] for j in range(N)], []
        for t in range(T):
            r = softmax_ref(torch.stack([torch.dot(row, h) for row in rows]) * scale)
            read = sum(r[j] * rows[j] for j in range(N))
            h = torch.tanh(torch.mv(Wh, h) + xw[i, t] + read + b)
            w = torch.mv(Ww, h)
            a = softmax_ref(torch.stack([torch.dot(row, h) for row in rows]) * scale)
            rows = [(1 - a[j]) * rows[j] + a[j] * w for j in range(N)]
            yi.append(h)
        ys.append(torch.stack(yi))
        hT.append(h)
        tT.append(torch.stack(rows))
    return torch.stack(ys), torch.stack(hT), torch.stack(tT)


# ---------------- inputs (scaled as recurrent.lua's runners scale them) ----------------

def make_inputs(c, io, dev, st=None):
    """Returns (inputs, out_shape). io: the inputs' dtype; st: that of E88's S0 (f32 state)."""
    st = st or torch.float32
    B, T = c["B"], c["T"]

    def rn(*shape, dtype=io):
        return torch.randn(*shape, dtype=torch.float32, device=dev).to(dtype)

    if c["kind"] == "e88":
        H, n, V = c["H"], c["n"], c["v"]
        q, k = rn(B, T, H, n), rn(B, T, H, n)
        v, g = rn(B, T, H, V), rn(B, T, H, V)
        decay = (torch.rand(B, T, H, device=dev) * 0.5 + 0.5).to(io)  # (0.5, 1), as recurrent.lua
        S0 = rn(B, H, n, V, dtype=st) * 0.1
        return [q, k, v, decay, g, S0], (B, T, H, V)
    d = c["d"]
    xw = rn(B, T, d)
    Wh = (rn(d, d, dtype=torch.float32) / math.sqrt(d)).to(io)
    b = (rn(d, dtype=torch.float32) * 0.1).to(io)
    h0 = (rn(B, d, dtype=torch.float32) * 0.5).to(io)
    if c["kind"] == "e1":
        z = rn(B, T, d)
        return [xw, z, Wh, b, h0], (B, T, d)
    Ww = (rn(d, d, dtype=torch.float32) / math.sqrt(d)).to(io)
    tape0 = (rn(B, c["N"], d, dtype=torch.float32) * 0.5).to(io)
    return [xw, Wh, Ww, b, h0, tape0], (B, T, d)


LAYERS = {"e88": e88_layer, "e1": e1_layer, "e23": e23_layer}
REFS = {"e88": e88_ref, "e1": e1_ref, "e23": e23_ref}


# ---------------- self-check ----------------

def self_check(dev):
    """Step loop vs independent formulation in f64 on the CPU; then bf16 on dev vs f64."""
    tiny = [dict(kind="e88", B=2, T=5, H=3, n=4, v=3), dict(kind="e1", B=2, T=6, d=5),
            dict(kind="e23", B=2, T=6, d=5, N=3)]
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(1234)
    worst = []
    ok = True
    for c in tiny:
        f64 = torch.float64
        leaves, shape = make_inputs(c, f64, "cpu", st=f64)
        leaves = [x.detach().requires_grad_(True) for x in leaves]
        dy = torch.randn(shape, dtype=f64)
        outs = LAYERS[c["kind"]](*leaves, acc=f64, out=f64)
        refs = REFS[c["kind"]](*leaves)
        names = ["out"] + ["state%d" % i for i in range(1, len(outs))]
        gl = torch.autograd.grad((outs[0] * dy).sum() + sum(o.sum() for o in outs[1:]), leaves)
        gr = torch.autograd.grad((refs[0] * dy).sum() + sum(o.sum() for o in refs[1:]), leaves)
        pairs = list(zip(names, outs, refs)) + [("grad%d" % i, a, b)
                                                 for i, (a, b) in enumerate(zip(gl, gr))]
        err = 0.0
        for what, a, b in pairs:
            e = ((a - b).norm() / (b.norm() + 1e-300)).item()
            if not e < 1e-10:
                print("torch_recurrent.py: SELF-CHECK FAILED: %s %s: relative error %.3g "
                      "(step loop vs independent formulation, f64)" % (c["kind"], what, e),
                      file=sys.stderr, flush=True)
                ok = False
            err = max(err, e)
        msg = "%s f64 %.1e" % (c["kind"], err)
        # the production path: bf16 inputs on dev (the GPU), f32 state, vs the same values in f64
        lo = [x.detach().to(dev, torch.float32 if c["kind"] == "e88" and i == 5
                            else torch.bfloat16) for i, x in enumerate(leaves)]  # S0 is f32
        with torch.no_grad():
            y = LAYERS[c["kind"]](*lo, acc=torch.float32, out=torch.bfloat16)[0]
            y64 = LAYERS[c["kind"]](*[x.double().cpu() for x in lo], acc=f64, out=f64)[0]
        e = ((y.double().cpu() - y64).norm() / y64.norm()).item()
        if not e < 2e-2:
            print("torch_recurrent.py: SELF-CHECK FAILED: %s bf16 on %s vs f64: "
                  "relative error %.3g" % (c["kind"], dev, e), file=sys.stderr, flush=True)
            ok = False
        msg += ", bf16 %s %.1e" % (dev, e)
        worst.append(msg)
    torch.random.set_rng_state(gen_state)
    print("self-check (relative errors, step loop vs independent formulation): %s: %s"
          % ("; ".join(worst), "passed" if ok else "FAILED"), flush=True)
    return ok


# ---------------- timing ----------------

class Clock:
    def __init__(self, cuda):
        self.cuda = cuda
        if cuda:
            self.ev0 = torch.cuda.Event(enable_timing=True)
            self.ev1 = torch.cuda.Event(enable_timing=True)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def once_us(self, fn):
        """Microseconds of one call: CUDA events around it (the GPU idle before), else host."""
        self.sync()
        if self.cuda:
            self.ev0.record()
            fn()
            self.ev1.record()
            self.ev1.synchronize()
            return self.ev0.elapsed_time(self.ev1) * 1000.0
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6


def shape_of(c):
    if c["kind"] == "e88":
        return "B%d T%d H%d n%d v%d" % (c["B"], c["T"], c["H"], c["n"], c["v"])
    return "B%d T%d d%d%s" % (c["B"], c["T"], c["d"], (" N%d" % c["N"]) if "N" in c else "")


def run_case(c, clock, dev, warm, reps, budget_s, res):
    """Fills res with the case's numbers (fwd_us first, so a failure keeps what was measured)."""
    io = torch.bfloat16 if dev == "cuda" else torch.float32
    acc = torch.float32
    leaves, shape = make_inputs(c, io, dev)
    leaves = [x.requires_grad_(True) for x in leaves]
    dy = torch.randn(shape, device=dev).to(io)
    layer = LAYERS[c["kind"]]

    def fwd():
        with torch.no_grad():
            return layer(*leaves, acc=acc, out=io)

    state = {}

    def graph():  # untimed: a forward with grad, the graph kept in state
        for x in leaves:
            x.grad = None
        state["y"] = layer(*leaves, acc=acc, out=io)[0]
        clock.sync()

    def bwd():
        torch.autograd.backward(state.pop("y"), dy)

    # the first warm-up, on the host clock, decides the repeats; it also gives the graph's peak
    t0 = time.perf_counter()
    fwd()
    clock.sync()
    t1 = time.perf_counter()
    if dev == "cuda":
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    graph()
    t2 = time.perf_counter()
    bwd()
    clock.sync()
    t3 = time.perf_counter()
    if dev == "cuda":
        res["graph_peak_bytes"] = torch.cuda.max_memory_allocated() - base
    one = t3 - t0
    res["first_iter_s"] = round(one, 4)
    warm_c, reps_c = warm, reps
    planned = one * (warm - 1 + reps)
    if planned > budget_s:
        warm_c = 1
        reps_c = max(1, min(reps, int(budget_s // one)))
        print("  %s: one forward + graph + backward took %.2f s (fwd %.2f, graph %.2f, bwd %.2f); "
              "%d more warm-ups and %d repeats would take %.0f s > this case's budget %.0f s: "
              "no more warm-ups, %d repeat(s)" % (c["name"], one, t1 - t0, t2 - t1, t3 - t2,
                                                  warm - 1, reps, planned, budget_s, reps_c),
              flush=True)
    res["warmup"], res["reps"] = warm_c, reps_c
    for _ in range(warm_c - 1):
        fwd()
        graph()
        bwd()
    clock.sync()
    res["fwd_us"] = statistics.median(clock.once_us(fwd) for _ in range(reps_c))
    times = []
    for _ in range(reps_c):
        graph()
        times.append(clock.once_us(bwd))
    res["bwd_us"] = statistics.median(times)


def fmt(v, spec="%.0f"):
    return "-" if v is None else spec % v


ROW = "%-16s %-22s %11s %11s %9s %9s %5s %9s"


def main():
    global torch, F
    args = parse_args()
    try:
        import torch as torch_mod
        import torch.nn.functional as F_mod
    except ImportError as e:
        print("torch_recurrent.py: PyTorch is not importable (%s); this peer needs torch (with "
              "CUDA for the real cases)" % e, file=sys.stderr)
        return 1
    torch, F = torch_mod, F_mod
    cuda = torch.cuda.is_available() and not args.cpu
    if not cuda:
        if args.require_cuda:
            print("torch_recurrent.py: no GPU: torch.cuda.is_available() is false (torch %s, CUDA "
                  "%s)" % (torch.__version__, torch.version.cuda), file=sys.stderr)
            return 1
        print("torch_recurrent.py: NOTE: no CUDA (%s): the self-check and recurrent.lua's tiny "
              "cpu rows on the CPU, f32 inputs, host clock; a smoke run, not a peer"
              % ("--cpu" if args.cpu else "torch.cuda.is_available() is false"), flush=True)
    dev = "cuda" if cuda else "cpu"
    if cuda and args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
    tf32 = bool(cuda and torch.backends.cuda.matmul.allow_tf32)
    device = torch.cuda.get_device_name(0) if cuda else "cpu"
    warm, reps = (1, 2) if args.quick else (2, 5)
    start = time.perf_counter()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    check = "skipped"
    if not args.no_check:
        if not self_check(dev):
            print("torch_recurrent.py: the self-check failed; no timings", file=sys.stderr)
            return 1
        check = "passed"

    todo = [c for c in CASES if (args.only is None or args.only in c["name"])
            and bool(c.get("cpu")) != cuda]
    if not todo:
        print("torch_recurrent.py: WARNING: no case to run (--only %r on %s)" % (args.only, dev),
              file=sys.stderr)
    guess = sum(c["T"] * GUESS_STEP_US[c["kind"]] * (warm + reps) for c in todo) * 1e-6
    print("PyTorch %s eager recurrences on %s, %s%s" % (
        torch.__version__, device, date, " (--quick: smoke numbers)" if args.quick else ""))
    print("%d case(s), median of %d repeats after %d warm-ups; %s; expected ~%.1f s in all "
          "(a guess at ~%s us per step, e88/e1/e23, for forward + graph + backward; a case "
          "over %.0f s runs fewer repeats)" % (len(todo), reps, warm, "GPU times from torch.cuda.Event" if cuda
                              else "host clock", guess,
                              "/".join("%.0f" % GUESS_STEP_US[k] for k in ("e88", "e1", "e23")),
                              CASE_BUDGET_S), flush=True)
    print()
    print(ROW % ("case", "shape", "fwd us", "bwd us", "fwd/step", "bwd/step", "reps", "graph MiB"))
    print(ROW % tuple("-" * n for n in (16, 22, 11, 11, 9, 9, 5, 9)), flush=True)

    torch.manual_seed(0)
    clock = Clock(cuda)
    cases, order, failures = {}, [], []
    for i, c in enumerate(todo):
        name = c["name"]
        res = dict(what=WHAT[c["kind"]], shape=shape_of(c), T=c["T"], fwd_us=None, bwd_us=None)
        cases[name] = res
        order.append(name)
        left = TOTAL_BUDGET_S - (time.perf_counter() - start)
        budget = max(1.0, min(CASE_BUDGET_S, left / (len(todo) - i)))
        try:
            run_case(c, clock, dev, warm, reps, budget, res)
        except Exception as e:  # a failed case is recorded; the others still run
            msg = "%s: %s" % (type(e).__name__, str(e).split("\n")[0])
            res["error"] = msg
            failures.append("%s: %s" % (name, msg))
            print("torch_recurrent.py: case %s failed: %s" % (name, msg), file=sys.stderr)
            traceback.print_exc()
        for key in ("fwd", "bwd"):
            if res.get(key + "_us") is not None:
                res[key + "_step_us"] = res[key + "_us"] / c["T"]
        peak = res.get("graph_peak_bytes")
        print(ROW % (name, res["shape"], fmt(res["fwd_us"]), fmt(res["bwd_us"]),
                     fmt(res.get("fwd_step_us"), "%.1f"), fmt(res.get("bwd_step_us"), "%.1f"),
                     res.get("reps", "-"), fmt(peak and peak / 2 ** 20, "%.1f"))
              + ("  failed: " + res["error"] if "error" in res else ""), flush=True)
        if cuda:
            try:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            except Exception:  # a broken context fails the later cases on its own
                pass
    total = time.perf_counter() - start
    print()
    print("fwd: one layer call under no_grad; bwd: torch.autograd.backward alone (graph from an "
          "untimed forward); us/step = us / T; graph MiB: peak of forward with grad + backward")
    print("total %.1f s (the guess was ~%.1f s)" % (total, guess))
    meta = dict(device=device, torch=torch.__version__, cuda=torch.version.cuda, date=date,
                quick=args.quick, reps=reps, warmup=warm, tf32=tf32,
                precision="bf16 inputs and outputs; f32 copies of the inputs made once per "
                          "call, f32 state and per-step math" if cuda else
                          "cpu smoke run: f32 inputs, f32 state and math",
                cpu_smoke=not cuda, check=check, failures=failures, total_s=round(total, 1),
                case_budget_s=CASE_BUDGET_S, total_budget_s=TOTAL_BUDGET_S, only=args.only,
                python=sys.version.split()[0])
    return peer_results.finish("torch_recurrent.py", args.out, meta, order, cases, failures)


if __name__ == "__main__":
    sys.exit(main())
