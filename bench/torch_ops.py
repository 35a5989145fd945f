#!/usr/bin/env python3
"""torch_ops.py: the PyTorch (CUDA, eager) side of `nuvec bench ops`, on the same GPU and the same
cases (run by bench/h200.sh; needs torch with CUDA).

Each case runs its op `reps` times between CUDA events (repetitions write the same output, as
nuvec's do), sized to about 20 ms a run; the time per op is the median of 5 runs. GB/s counts the
bytes the op must move (inputs read once, the output written once; for matrix-vector products
the weights). PyTorch has no Q8_0/Q4_0 kernels: their cases run the F16 product of the same
shape (its weights' bytes), PyTorch's nearest equivalent, and say so. Prints a table, or JSON
with --json.
"""
import argparse
import json
import statistics
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--size", type=int, default=2 << 30, help="bytes a tensor for the large elementwise cases")
    ap.add_argument("--filter", default=None)
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"torch_ops: no torch: {e}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("torch_ops: no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    dt = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}

    def rand(shape, dtype):
        return (torch.rand(shape, device=dev, dtype=torch.float32) + 0.5).to(dtype)

    size = args.size
    big = f"{size / (1 << 30):.3g} GiB"
    cases = []

    def case(name, dtype, shape, nbytes, make, note=""):
        cases.append((name, dtype, shape, nbytes, make, note))

    # Large elementwise, as nuvec's (each tensor `size` bytes).
    case("copy", "U32", big, 2 * size, lambda: (lambda a, o: (lambda: o.copy_(a)))(
        torch.empty(size // 4, device=dev, dtype=torch.int32).fill_(1), torch.empty(size // 4, device=dev, dtype=torch.int32)))
    for name, d, n in (("add", "F32", size // 4), ("add", "F16", size // 2), ("add", "BF16", size // 2), ("mul", "F16", size // 2)):
        op = torch.add if name == "add" else torch.mul
        case(name, d, big, 3 * size, (lambda op, d, n: lambda: (lambda a, b, o: (lambda: op(a, b, out=o)))(
            rand(n, dt[d]), rand(n, dt[d]), torch.empty(n, device=dev, dtype=dt[d])))(op, d, n))
    # Decode shapes.
    for name, d, n in (("add", "F32", 4096), ("add", "F16", 4096), ("mul", "F16", 11008)):
        op = torch.add if name == "add" else torch.mul
        es = 4 if d == "F32" else 2
        case(name, d, str(n), 3 * n * es, (lambda op, d, n: lambda: (lambda a, b, o: (lambda: op(a, b, out=o)))(
            rand(n, dt[d]), rand(n, dt[d]), torch.empty(n, device=dev, dtype=dt[d])))(op, d, n))

    rows = []
    for name, d, shape, nbytes, make, note in cases:
        if args.filter and args.filter not in name and name != "copy":
            continue
        fn = make()
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        one = start.elapsed_time(end) / 1e3
        reps = max(1, min(2000, int(0.02 / max(one, 1e-7))))
        per = []
        for _ in range(5):
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            per.append(start.elapsed_time(end) / 1e3 / reps)
        s = statistics.median(per)
        rows.append({"op": name, "dtype": d, "shape": shape, "us_per_op": s * 1e6, "gbps": nbytes / s / 1e9,
                     "bytes": nbytes, "reps": reps, "note": note})
        del fn
        torch.cuda.empty_cache()
    copy = next((r["gbps"] for r in rows if r["op"] == "copy"), 0)
    for r in rows:
        r["fraction_of_copy"] = r["gbps"] / copy if copy else 0
    if args.json:
        print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "copy_gbps": copy,
                          "cases": rows}, indent=1))
    else:
        print(f"torch_ops on {torch.cuda.get_device_name(0)} (torch {torch.__version__})")
        print(f"{'op':10} {'dtype':6} {'shape':12} {'us/op':>10} {'GB/s':>9} {'of copy':>8}  note")
        for r in rows:
            print(f"{r['op']:10} {r['dtype']:6} {r['shape']:12} {r['us_per_op']:10.2f} {r['gbps']:9.1f} "
                  f"{r['fraction_of_copy'] * 100:7.0f}%  {r['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
