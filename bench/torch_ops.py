#!/usr/bin/env python3
"""torch_ops.py: the PyTorch (CUDA, eager) side of `nuvec bench ops`, on the same GPU and the same
cases (run by bench/h200.sh; needs torch with CUDA).

Each case runs its op `reps` times between CUDA events (repetitions write the same output, as
nuvec's do), sized to about 20 ms a run; the time per op is the median of 5 runs. GB/s counts the
bytes the op must move (inputs read once, the output written once; for matrix-vector products
the weights; for decode attention the KV bytes); matrix products and attention also report
TFLOP/s (torch.nn.functional.linear and scaled_dot_product_attention). PyTorch has no Q8_0/Q4_0 kernels: their cases run the F16 product of the same
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
    ap.add_argument("--filter", default=None,
                    help='the cases whose "op dtype shape" contains TEXT (as nuvec bench ops --filter), and the copy')
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

    def case(name, dtype, shape, nbytes, make, note="", flops=0.0):
        cases.append((name, dtype, shape, nbytes, make, note, flops))

    def empty(shape, dtype):
        return torch.empty(shape, device=dev, dtype=dtype)

    n32, n16 = size // 4, size // 2
    rows = max(1, n16 // 4096)
    ew = ">= 0.95x torch"
    f16, f32, bf16 = torch.float16, torch.float32, torch.bfloat16
    # Each maker returns a function running the op once, on tensors made now (as nuvec's cases).
    case("copy", "U32", big, 2 * size, lambda: (lambda a, o: lambda: o.copy_(a))(
        torch.ones(n32, device=dev, dtype=torch.int32), empty(n32, torch.int32)))
    for name, d, n in (("add", "F32", n32), ("add", "F16", n16), ("add", "BF16", n16), ("mul", "F16", n16)):
        op = torch.add if name == "add" else torch.mul
        case(name, d, big, 3 * size, (lambda op, t, n: lambda: (lambda a, b, o: lambda: op(a, b, out=o))(
            rand(n, t), rand(n, t), empty(n, t)))(op, dt[d], n))
    for name, src, dst, n, nbytes in (("cast", f32, f16, n32, 1.5 * size), ("cast", f16, f32, n16 // 2, 1.5 * size),
                                      ("cast", bf16, f16, n16, 2 * size)):
        case(name, {f32: "F32", f16: "F16", bf16: "BF16"}[src], "", nbytes, (lambda s_, d_, n: lambda: (
            lambda a, o: lambda: o.copy_(a))(rand(n, s_), empty(n, d_)))(src, dst, n))
    # Q4_0/Q8_0 dequantization: PyTorch has no such kernel; its nearest equivalent is an int8 -> f16
    # conversion with a per-block scale multiply (the bytes a dequantization must move: int8 in,
    # f16 out, plus scales).
    def dequant():
        q = torch.randint(-8, 8, (rows, 4096 // 32, 32), device=dev, dtype=torch.int8)
        sc = rand((rows, 4096 // 32, 1), f16)
        o = empty((rows, 4096 // 32, 32), f16)
        return lambda: torch.mul(q, sc, out=o)
    case("dequant", "Q8_0", "q8_0>f16", rows * 4096 * (34 / 32 + 2), dequant, "int8 * f16 scale (PyTorch has no Q8_0)")
    unary = {"silu": F.silu, "gelu": F.gelu, "exp": torch.exp}
    for name, d, n in (("silu", "F16", n16), ("gelu", "F16", n16), ("exp", "F32", n32)):
        fn = unary[name]
        case(name, d, big, 2 * size, (lambda fn, t, n: lambda: (lambda a, o: lambda: o.copy_(fn(a)) if fn is F.gelu
                                                                 else fn(a, out=o) if fn is torch.exp
                                                                 else o.copy_(fn(a)))(rand(n, t), empty(n, t)))(fn, dt[d], n),
             "out-of-place op then copy_ where PyTorch has no out=" if name != "exp" else "")
    case("scale", "BF16", big, 2 * size, lambda: (lambda a, o: lambda: torch.mul(a, 0.5, out=o))(rand(n16, bf16), empty(n16, bf16)))
    case("swiglu", "F16", big, 3 * size, lambda: (lambda g, u, o: lambda: torch.mul(F.silu(g), u, out=o))(
        rand(n16, f16), rand(n16, f16), empty(n16, f16)), "silu(g) * u: two kernels in eager PyTorch")
    case("rms_norm", "F16", "rows x 4096", 2 * size, lambda: (lambda x, w: lambda: F.rms_norm(x, (4096,), w, 1e-5))(
        rand((rows, 4096), f16), rand(4096, f16)))
    case("layer_norm", "F16", "rows x 4096", 2 * size, lambda: (lambda x, w, b: lambda: F.layer_norm(x, (4096,), w, b, 1e-5))(
        rand((rows, 4096), f16), rand(4096, f16), rand(4096, f16)))
    case("softmax", "F16", "rows x 4096", 2 * size, lambda: (lambda x: lambda: torch.softmax(x * 0.125, -1))(
        rand((rows, 4096), f16)), "softmax(scale * x): the scale is a second kernel in PyTorch")
    case("sum", "F16", "rows x 4096", size, lambda: (lambda x, o: lambda: torch.sum(x, -1, dtype=f32, out=o))(
        rand((rows, 4096), f16), empty(rows, f32)))

    def rope(half):
        x = rand((rows, 32, 128), f16)
        pos = torch.arange(rows, device=dev, dtype=f32) + 1000
        inv = 10000.0 ** (-torch.arange(0, 128, 2, device=dev, dtype=f32) / 128)
        ang = pos[:, None] * inv[None, :]
        cos, sin = torch.cos(ang).to(f16)[:, None, :], torch.sin(ang).to(f16)[:, None, :]
        if half:
            def run():
                a, b = x[..., :64], x[..., 64:]
                return torch.cat((a * cos - b * sin, a * sin + b * cos), -1)
        else:
            def run():
                a, b = x[..., 0::2], x[..., 1::2]
                return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)
        return run
    case("rope", "F16", "rows x 32 x 128", 2 * size, lambda: rope(False), "eager formula, cos/sin precomputed (as HF)")
    case("rope_half", "F16", "rows x 32 x 128", 2 * size, lambda: rope(True), "eager formula, cos/sin precomputed (as HF)")
    ntok = min(rows, 32000)
    case("gather", "F16", "rows of 4096", 2 * 2 * 4096 * ntok, lambda: (lambda t, i: lambda: F.embedding(i, t))(
        rand((32000, 4096), f16), torch.arange(ntok, device=dev, dtype=torch.long) * 7919 % 32000))
    # Decode shapes.
    case("add", "F32", "4096", 3 * 4096 * 4, lambda: (lambda a, b, o: lambda: torch.add(a, b, out=o))(
        rand(4096, f32), rand(4096, f32), empty(4096, f32)))
    case("mul", "F16", "11008", 3 * 11008 * 2, lambda: (lambda a, b, o: lambda: torch.mul(a, b, out=o))(
        rand(11008, f16), rand(11008, f16), empty(11008, f16)))
    case("swiglu", "F16", "11008", 3 * 11008 * 2, lambda: (lambda g, u, o: lambda: torch.mul(F.silu(g), u, out=o))(
        rand(11008, f16), rand(11008, f16), empty(11008, f16)))
    case("rms_norm", "F32", "1 x 4096", 2 * 4096 * 4, lambda: (lambda x, w: lambda: F.rms_norm(x, (4096,), w, 1e-5))(
        rand((1, 4096), f32), rand(4096, f32)))
    case("softmax", "F32", "32 x 4096", 2 * 32 * 4096 * 4, lambda: (lambda x: lambda: torch.softmax(x, -1))(rand((32, 4096), f32)))
    case("argmax", "F32", "32000", 32000 * 4, lambda: (lambda x: lambda: torch.argmax(x, -1))(rand((1, 32000), f32)))
    case("gather", "F16", "1 of 32000", 4096 * (2 + 4), lambda: (lambda t, i: lambda: F.embedding(i, t).float())(
        rand((32000, 4096), f16), torch.full((1,), 7919, device=dev, dtype=torch.long)))
    # Matrix-vector products: one token against the 7B decode shapes (n x k); weights rotated over
    # copies of 256 MiB in all, as nuvec's, so that they come from memory, not L2.
    for d in ("F16", "BF16", "F32"):
        for n, k in ((4096, 4096), (11008, 4096), (4096, 11008), (32000, 4096)):
            es = 4 if d == "F32" else 2
            def mk(n=n, k=k, t=dt[d], es=es):
                copies = max(1, min(16, (256 << 20) // (n * k * es)))
                ws = [rand((n, k), t) for _ in range(copies)]
                x = rand((1, k), t)
                it = [0]
                def run():
                    it[0] += 1
                    return F.linear(x, ws[it[0] % copies])
                return run
            case("matvec", d, f"{n}x{k}", n * k * es, mk, "F.linear, 1 token (cuBLAS)")
    # Matrix products (TFLOP/s of 2 m n k): y = x w^T with w [n, k] as weight files store it
    # (F.linear, cuBLAS), square and the 512-token prefill shapes of a 7B Llama.
    def linear(m, n, k, t):
        x, w = rand((m, k), t), rand((n, k), t)
        return lambda: F.linear(x, w)
    for d in ("F16", "BF16"):
        for n in (1024, 4096, 8192):
            case("matmul", d, f"{n}^3", 3 * n * n * 2, (lambda n=n, t=dt[d]: linear(n, n, n, t)),
                 "F.linear (cuBLAS)", 2.0 * n ** 3)
    for d in ("F16", "BF16"):
        for n in (4096, 11008, 32000):
            case("matmul", d, f"512x4096>{n}", n * 4096 * 2 + 2 * 512 * (4096 + n),
                 (lambda n=n, t=dt[d]: linear(512, n, 4096, t)), "F.linear (cuBLAS)", 2.0 * 512 * n * 4096)
    # A 512-token prefill pass's own products (q|k|v and gate|up stacked, down), as nuvec bench ops.
    for n, k in ((12288, 4096), (22016, 4096), (4096, 11008)):
        case("matmul", "F16", f"512x{k}>{n}", 2 * (n * k + 512 * (k + n)),
             (lambda n=n, k=k: linear(512, n, k, f16)), "F.linear (cuBLAS)", 2.0 * 512 * n * k)
    # Q8_0 / Q4_0 weights: PyTorch has no such product; its nearest equivalent dequantizes (int8
    # quants times the per-block F16 scale) to F16, then runs the F16 product: nuvec's matmul_dq.
    for d, qb in (("Q8_0", 34), ("Q4_0", 18)):
        for n in (4096, 11008, 32000):
            def mkdq(n=n):
                q = torch.randint(-8, 8, (n, 4096 // 32, 32), device=dev, dtype=torch.int8)
                sc = rand((n, 4096 // 32, 1), f16)
                w = empty((n, 4096 // 32, 32), f16)
                x = rand((512, 4096), f16)
                def run():
                    torch.mul(q, sc, out=w)
                    return F.linear(x, w.view(n, 4096))
                return run
            case("matmul_dq", d, f"512x4096>{n}", n * 4096 * qb / 32 + 4 * n * 4096 + 2 * 512 * (4096 + n), mkdq,
                 "int8 * f16 scale, then F.linear (PyTorch has no Q8_0/Q4_0 product)", 2.0 * 512 * n * 4096)
    # Attention: decode (1 query row, 32 heads of 128, F16) against KV caches of 8 or 32 heads,
    # rotated over copies of 256 MiB in all as nuvec's (GB/s of the KV bytes read); prefill of 512
    # and 4096 tokens, causal, 32 heads (TFLOP/s of the causal half of 4 T^2 D H).
    def sdpa(q, k, v, causal):
        if q.shape[1] != k.shape[1]:
            try:
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            except TypeError:  # torch < 2.5: no enable_gqa
                g = q.shape[1] // k.shape[1]
                return F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                                      is_causal=causal)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    for kvh in (8, 32):
        for n in (512, 4096, 8192, 32768):
            def mkdec(n=n, kvh=kvh):
                per = 2 * n * kvh * 128 * 2
                copies = max(1, min(16, -(-(256 << 20) // per)))
                kv = [(rand((1, kvh, n, 128), f16), rand((1, kvh, n, 128), f16)) for _ in range(copies)]
                q = rand((1, 32, 1, 128), f16)
                it = [0]
                def run():
                    it[0] += 1
                    k, v = kv[it[0] % copies]
                    return sdpa(q, k, v, False)
                return run
            case("attn_dec", "F16", f"{n} kv{kvh}", 2 * n * kvh * 128 * 2, mkdec,
                 "F.scaled_dot_product_attention, enable_gqa (or repeat_interleave)", 4.0 * n * 32 * 128)
    for n in (512, 4096):
        def mkpre(n=n):
            q, k, v = (rand((1, 32, n, 128), f16) for _ in range(3))
            return lambda: sdpa(q, k, v, True)
        case("attn_pre", "F16", f"{n} causal", 4 * n * 32 * 128 * 2, mkpre, "F.scaled_dot_product_attention, causal",
             2.0 * n * n * 128 * 32)
    # A later pass of a long prompt's prefill: 512 query rows at positions 3,456..3,967 against
    # 3,968 keys, causal from the bottom right (each row sees position + 1 keys), as nuvec's case.
    def mklater():
        q = rand((1, 32, 512, 128), f16)
        k, v = (rand((1, 32, 3968, 128), f16) for _ in range(2))
        try:
            from torch.nn.attention.bias import causal_lower_right
            bias = causal_lower_right(512, 3968)
            return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        except ImportError:
            mask = torch.ones(512, 3968, dtype=torch.bool, device=dev).tril(3968 - 512)
            return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    case("attn_pre", "F16", "512 after 3456", (2 * 512 + 2 * 3968) * 32 * 128 * 2, mklater,
         "F.scaled_dot_product_attention, causal_lower_right", 4.0 * 512 * (3456 + 256.5) * 128 * 32)
    out = []
    for name, d, shape, nbytes, make, note, flops in cases:
        if args.filter and args.filter not in f"{name} {d} {shape}" and name != "copy":
            continue
        try:
            fn = make()
            fn()
            torch.cuda.synchronize()
        except Exception as e:  # a case PyTorch cannot run here is reported, not fatal
            print(f"torch_ops: {name} {d} {shape}: {e}", file=sys.stderr)
            continue
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
        row = {"op": name, "dtype": d, "shape": shape, "us_per_op": s * 1e6, "gbps": nbytes / s / 1e9,
               "bytes": nbytes, "reps": reps, "note": note}
        if flops:
            row["tflops"] = flops / s / 1e12
        out.append(row)
        del fn
        torch.cuda.empty_cache()
    rows = out
    copy = next((r["gbps"] for r in rows if r["op"] == "copy"), 0)
    for r in rows:
        r["fraction_of_copy"] = r["gbps"] / copy if copy else 0
    if args.json:
        print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "copy_gbps": copy,
                          "cases": rows}, indent=1))
    else:
        print(f"torch_ops on {torch.cuda.get_device_name(0)} (torch {torch.__version__})")
        print(f"{'op':10} {'dtype':6} {'shape':15} {'us/op':>10} {'GB/s':>9} {'of copy':>8} {'TFLOP/s':>8}  note")
        for r in rows:
            tf = f"{r['tflops']:.3g}" if "tflops" in r else "-"
            print(f"{r['op']:10} {r['dtype']:6} {r['shape']:15} {r['us_per_op']:10.2f} {r['gbps']:9.1f} "
                  f"{r['fraction_of_copy'] * 100:7.0f}% {tf:>8}  {r['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
