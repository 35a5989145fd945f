#!/usr/bin/env python3
"""torch_dispatch.py: the PyTorch (eager) side of `nuvec bench dispatch` and `nuvec bench
submit`, on the same GPU (run by bench/h200.sh; needs torch with CUDA).

  dependent    a chain of `count` in-place ops on one small tensor (x.add_(1) over 64 floats):
               each reads what the previous one wrote
  independent  `count` in-place ops on `count` disjoint 64-float rows of one tensor (views made
               beforehand), which PyTorch still launches in order on one stream
GPU time between CUDA events around the ops (per op), and the host time of the Python loop per
op; then the round trip of one small op (x.add_(1)) + torch.cuda.synchronize() over
`iterations` (median, p10, p90). Results are checked once. Prints a table, or JSON with --json.
"""
import argparse
import json
import math
import statistics
import sys
import time

ELEMS = 64


def percentile(values, p):
    v = sorted(values)
    i = max(0, min(len(v) - 1, math.ceil(p / 100.0 * len(v)) - 1))
    return v[i]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--iterations", type=int, default=2000)
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"torch_dispatch: no torch: {e}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("torch_dispatch: torch has no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    n = args.count
    x = torch.zeros(ELEMS, device=dev, dtype=torch.float32)
    out = torch.zeros(n, ELEMS, device=dev, dtype=torch.float32)
    rows = list(out.unbind(0))
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)

    def run(dependent):
        torch.cuda.synchronize()
        start.record()
        t0 = time.perf_counter()
        if dependent:
            for _ in range(n):
                x.add_(1.0)
        else:
            for r in rows:
                r.add_(1.0)
        t1 = time.perf_counter()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3, (t1 - t0) * 1e6 / n

    results = {}
    for name, dependent in (("dependent", True), ("independent", False)):
        x.zero_()
        out.zero_()
        run(dependent)  # warm-up, checked
        if dependent:
            ok = bool(torch.all(x == float(n)).item())
        else:
            ok = bool(torch.all(out == 1.0).item())
        if not ok:
            print(f"torch_dispatch: {name}: wrong results", file=sys.stderr)
            return 1
        gpu, cpu = [], []
        for _ in range(args.reps):
            g, c = run(dependent)
            gpu.append(g)
            cpu.append(c)
        results[name] = {
            "gpu_us_per_op": statistics.median(gpu) / n,
            "cpu_us_per_op": statistics.median(cpu),
            "gpu_us_total": statistics.median(gpu),
            "checked": True,
        }

    small = torch.zeros(256, device=dev, dtype=torch.int32)
    for _ in range(20):
        small.add_(1)
        torch.cuda.synchronize()
    rt = []
    for _ in range(args.iterations):
        t0 = time.perf_counter_ns()
        small.add_(1)
        torch.cuda.synchronize()
        rt.append((time.perf_counter_ns() - t0) / 1e3)
    if int(small[0].item()) != 20 + args.iterations:
        print("torch_dispatch: the round trips' op did not run", file=sys.stderr)
        return 1
    results["op_sync"] = {
        "median_us": statistics.median(rt),
        "p10_us": percentile(rt, 10),
        "p90_us": percentile(rt, 90),
    }

    name = torch.cuda.get_device_name(0)
    if args.json:
        doc = {
            "benchmark": "torch",
            "device": {"name": name, "torch": torch.__version__, "cuda": torch.version.cuda},
            "method": {"count": n, "repetitions": args.reps, "iterations": args.iterations,
                       "elements_per_op": ELEMS, "op": "Tensor.add_(1.0)", "statistic": "median"},
            "results": results,
        }
        print(json.dumps(doc, indent=2))
    else:
        print(f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}) eager on {name}: x.add_(1.0) over "
              f"{ELEMS} floats per op;\n{n} ops, median of {args.reps} repetitions after a checked warm-up\n")
        print(f"{'':44} | {'dependent':>12} | {'independent':>12}")
        d, i = results["dependent"], results["independent"]
        print(f"{'GPU time per op (us)':44} | {d['gpu_us_per_op']:12.3f} | {i['gpu_us_per_op']:12.3f}")
        print(f"{'CPU time per op (us)':44} | {d['cpu_us_per_op']:12.3f} | {i['cpu_us_per_op']:12.3f}")
        r = results["op_sync"]
        print(f"\none op + torch.cuda.synchronize(), {args.iterations} round trips:\n"
              f"median {r['median_us']:.2f} us, p10 {r['p10_us']:.2f} us, p90 {r['p90_us']:.2f} us")
        print(f"results checked (warm-up): chain = {n} and every independent row = 1: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
