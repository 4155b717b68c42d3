#!/usr/bin/env python3
"""PyTorch eager peer of scripts/bench/ops.lua: the same cases, shapes and timing policy.

    python3 scripts/peers/torch_ops.py [--out torch_ops.json] [--quick]

Prints its own table and writes JSON keyed by the case names ops.lua uses:
    {"meta": {...}, "order": [names],
     "cases": {name: {"time_us": t, "what": ..., "bytes"/"flops": ...}}}
time_us is the time per op or call (a failed case has "time_us": null and an "error").
Times are medians over repeats after warm-up; GPU times come from torch.cuda.Event around a batch
of calls recorded while the GPU is already busy (one untimed call goes first), host times from
time.perf_counter(). Needs only PyTorch with CUDA.
"""
import argparse
import datetime
import statistics
import sys
import time
import traceback

import peer_results  # beside this script

ROWS, COLS = 8192, 4096  # 32 Mi elements: 64 MiB in bf16
MB64 = ROWS * COLS * 2
NBUF = 3  # inputs rotate (L2 is ~50 MB, so 64 MiB already misses it; this makes sure)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--quick", action="store_true", help="few repeats (a smoke run)")
    return ap.parse_args()


class Timer:
    def __init__(self, torch, quick):
        self.torch = torch
        self.reps = 3 if quick else 15
        self.warm = 2 if quick else 5
        self.ev0 = torch.cuda.Event(enable_timing=True)
        self.ev1 = torch.cuda.Event(enable_timing=True)

    def gpu_us(self, fn, inner):
        """GPU microseconds per call: events around `inner` calls, median over the repeats."""
        for _ in range(self.warm):
            fn()
        self.torch.cuda.synchronize()
        times = []
        for _ in range(self.reps):
            fn()  # untimed: the GPU is busy when ev0 is recorded
            self.ev0.record()
            for _ in range(inner):
                fn()
            self.ev1.record()
            self.ev1.synchronize()
            times.append(self.ev0.elapsed_time(self.ev1) * 1000.0 / inner)
        return statistics.median(times)

    def host_us(self, fn, inner):
        """Host microseconds per call, launch only (the sync after each batch is not counted)."""
        for _ in range(self.warm * inner):
            fn()
        self.torch.cuda.synchronize()
        times = []
        for _ in range(self.reps):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            t1 = time.perf_counter()
            self.torch.cuda.synchronize()
            times.append((t1 - t0) * 1e6 / inner)
        return statistics.median(times)

    def latency_us(self, fn, calls):
        """Host microseconds of one call + synchronize, median over calls."""
        for _ in range(self.warm * 10):
            fn()
        self.torch.cuda.synchronize()
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            self.torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(times)


def run_cases(torch, quick):
    import torch.nn.functional as F

    tm = Timer(torch, quick)
    bf16 = dict(dtype=torch.bfloat16, device="cuda")
    torch.manual_seed(0)
    cases, order, failures = {}, [], []

    def add(name, what, us, **extra):
        cases[name] = dict(what=what, time_us=us, **extra)
        order.append(name)

    def case(name, fn):
        try:
            fn()
        except Exception as e:  # a failed case is recorded; the others still run
            msg = "%s: %s" % (type(e).__name__, e)
            print("torch_ops.py: case %s failed: %s" % (name, msg), file=sys.stderr)
            traceback.print_exc()
            failures.append("%s: %s" % (name, msg))
            if name not in cases:
                add(name, "failed", None, error=msg)
            try:
                torch.cuda.synchronize()
            except Exception:  # a broken context fails the later cases on its own
                pass

    # (a) host time per tiny op launched from Python
    def launch():
        x, y = torch.randn(1, 1, **bf16), torch.randn(1, 1, **bf16)
        add("launch_add_1x1", "x + y on [1,1] bf16, host time per launch (no sync between)",
            tm.host_us(lambda: x + y, 500))

    case("launch_add_1x1", launch)

    # (b) 100 tiny ops captured in one CUDA graph, replayed
    def graph():
        a, b = torch.randn(1, 1, **bf16), torch.randn(1, 1, **bf16)

        def chain():
            z = a
            for _ in range(100):
                z = z + b
            return z

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up off the capture, as the CUDA graph docs advise
            for _ in range(3):
                chain()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            captured = chain()
        g.replay()
        eager = chain()
        torch.cuda.synchronize()
        same = torch.equal(captured, eager)
        if not same:
            print("torch_ops.py: WARNING: graph replay differs from eager", file=sys.stderr)
        replays = 5 if quick else 20
        add("graph_add_x100", "100 chained [1,1] bf16 adds in one CUDA graph, GPU time per op",
            tm.gpu_us(g.replay, replays) / 100, replay_equals_eager=same)
        add("graph_replay_host", "host time of one replay of that graph (100 ops)",
            tm.host_us(g.replay, 20))

    case("graph_add_x100", graph)

    # (c) bandwidth-bound ops on 64 MiB bf16 tensors
    def bandwidth():
        xs = [torch.randn(ROWS, COLS, **bf16) for _ in range(NBUF)]
        ys = [torch.randn(ROWS, COLS, **bf16) for _ in range(NBUF)]
        w = torch.randn(COLS, **bf16)
        k = [0]

        def nxt():
            k[0] = (k[0] + 1) % NBUF
            return k[0]

        if hasattr(F, "rms_norm"):
            def rms(x):
                return F.rms_norm(x, (COLS,), w, eps=1e-6)
            rms_what = "F.rms_norm over rows of 4096 with a weight, bf16"
        else:  # torch < 2.4: the composite that eager PyTorch users write
            def rms(x):
                ms = x.float().pow(2).mean(-1, keepdim=True)
                return x * torch.rsqrt(ms + 1e-6).to(x.dtype) * w
            rms_what = "rms_norm composite (this torch has no F.rms_norm), bf16"

        def bw(name, what, nbytes, fn):
            case(name, lambda: add(name, what, tm.gpu_us(fn, 20), bytes=nbytes))

        bw("copy_64MiB", "x.clone(), 64 MiB bf16 (read + write)", 2 * MB64,
           lambda: xs[nxt()].clone())
        bw("add_64MiB", "x + y, [8192,4096] bf16", 3 * MB64, lambda: xs[nxt()] + ys[k[0]])
        bw("mul_64MiB", "x * y, [8192,4096] bf16", 3 * MB64, lambda: xs[nxt()] * ys[k[0]])
        bw("silu_64MiB", "F.silu(x), [8192,4096] bf16", 2 * MB64, lambda: F.silu(xs[nxt()]))
        bw("softmax_8192x4096", "torch.softmax over rows of 4096, bf16", 2 * MB64,
           lambda: torch.softmax(xs[nxt()], -1))
        bw("rms_norm_8192x4096", rms_what, 2 * MB64 + COLS * 2, lambda: rms(xs[nxt()]))
        del xs, ys, w

    case("bandwidth inputs", bandwidth)
    torch.cuda.empty_cache()

    # (d) GEMMs
    def gemm_big():
        m = 8192
        a, b = torch.randn(m, m, **bf16), torch.randn(m, m, **bf16)
        add("gemm_8192", "[8192,8192] @ [8192,8192] bf16 (torch.matmul)",
            tm.gpu_us(lambda: torch.matmul(a, b), 2 if quick else 5), flops=2 * m ** 3)

    case("gemm_8192", gemm_big)
    torch.cuda.empty_cache()

    x, W = torch.randn(4, 512, **bf16), torch.randn(512, 512, **bf16)
    flops, nbytes = 2 * 4 * 512 * 512, (4 * 512 * 2 + 512 * 512) * 2
    case("gemm_4x512x512", lambda: add(
        "gemm_4x512x512", "[4,512] @ [512,512] bf16, GPU time per call (200 in a row)",
        tm.gpu_us(lambda: torch.matmul(x, W), 200), flops=flops, bytes=nbytes))
    case("gemm_4x512x512_sync", lambda: add(
        "gemm_4x512x512_sync", "the same, host time of one call + synchronize",
        tm.latency_us(lambda: torch.matmul(x, W), 50 if quick else 500), flops=flops, bytes=nbytes))
    case("linear_4x512x512", lambda: add(
        "linear_4x512x512", "F.linear(x, W) = x @ W^T, [4,512] by [512,512] bf16, GPU time",
        tm.gpu_us(lambda: F.linear(x, W), 200), flops=flops, bytes=nbytes))
    return cases, order, failures, tm


def fmt_us(v):
    if v is None:
        return "-"
    if v >= 1000:
        return "%.3f ms" % (v / 1000)
    return "%.1f us" % v if v >= 100 else "%.2f us" % v


def print_table(cases, order):
    rows = [("case", "PyTorch", "rate", "what")]
    for name in order:
        c = cases[name]
        us, rate = c.get("time_us"), "-"
        if us:
            if c.get("bytes") and "gemm" not in name and "linear" not in name:
                rate = "%.0f GB/s" % (c["bytes"] / (us * 1e-6) / 1e9)
            elif c.get("flops"):
                rate = "%.1f TFLOP/s" % (c["flops"] / (us * 1e-6) / 1e12)
        rows.append((name, fmt_us(us), rate, c.get("what", "")))
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    for i, r in enumerate(rows):
        print("%s  %s  %s  %s" % (r[0].ljust(w[0]), r[1].rjust(w[1]), r[2].rjust(w[2]), r[3]))
        if i == 0:
            print("  ".join("-" * n for n in w) + "  " + "-" * 4)


def main():
    args = parse_args()
    try:
        import torch
    except ImportError as e:
        print("torch_ops.py: PyTorch is not importable (%s); this peer needs torch with CUDA" % e,
              file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("torch_ops.py: no GPU: torch.cuda.is_available() is false (torch %s, CUDA %s)"
              % (torch.__version__, torch.version.cuda), file=sys.stderr)
        return 1

    device = torch.cuda.get_device_name(0)
    cases, order, failures, tm = run_cases(torch, args.quick)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print("PyTorch %s eager ops on %s, %s%s" % (torch.__version__, device, date,
                                                 " (--quick: smoke numbers)" if args.quick else ""))
    print("median of %d repeats after %d warm-up calls; GPU times from torch.cuda.Event"
          % (tm.reps, tm.warm))
    print()
    print_table(cases, order)
    meta = dict(device=device, torch=torch.__version__, cuda=torch.version.cuda, date=date,
                quick=args.quick, reps=tm.reps, warmup=tm.warm, failures=failures,
                python=sys.version.split()[0])
    return peer_results.finish("torch_ops.py", args.out, meta, order, cases, failures)


if __name__ == "__main__":
    sys.exit(main())
