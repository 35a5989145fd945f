#!/usr/bin/env python3
"""torch_upload.py FILE [--reps N] [--json]: PyTorch's way of moving a safetensors file into GPU
memory, safetensors.torch.load_file(FILE, device="cuda"), timed on the same file that
`nuvec bench upload --file FILE --keep` wrote (in the page cache), with torch's own pinned
host-to-device copy of the same byte count as its bus reference. Median GB/s of N runs."""
import argparse
import json
import os
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        import torch
        from safetensors.torch import load_file
    except ImportError as e:
        print(f"torch_upload.py: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_upload.py: no CUDA device", file=sys.stderr)
        return 2
    size = os.path.getsize(a.file)
    load, pinned = [], []
    data_bytes = 0
    for _ in range(a.reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        tensors = load_file(a.file, device="cuda")
        torch.cuda.synchronize()
        t = time.perf_counter() - t0
        data_bytes = sum(v.numel() * v.element_size() for v in tensors.values())
        del tensors
        torch.cuda.empty_cache()
        load.append(data_bytes / t / 1e9)
    chunk = 1 << 30
    host = torch.empty(min(chunk, data_bytes), dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(data_bytes, dtype=torch.uint8, device="cuda")
    for _ in range(a.reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for at in range(0, data_bytes, chunk):
            n = min(chunk, data_bytes - at)
            dev[at:at + n].copy_(host[:n], non_blocking=True)
        torch.cuda.synchronize()
        pinned.append(data_bytes / (time.perf_counter() - t0) / 1e9)
    res = {
        "file": a.file,
        "file_bytes": size,
        "data_bytes": data_bytes,
        "reps": a.reps,
        "torch": torch.__version__,
        "gbps_median": {"load_file_cuda": statistics.median(load), "pinned_copy": statistics.median(pinned)},
        "gbps_all": {"load_file_cuda": load, "pinned_copy": pinned},
    }
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"PyTorch {torch.__version__}: {a.file} ({size / 2**30:.2f} GiB), median of {a.reps}")
        print(f"  safetensors.torch.load_file(device='cuda'): {res['gbps_median']['load_file_cuda']:8.2f} GB/s")
        print(f"  pinned host -> device copy_ (CUDA):         {res['gbps_median']['pinned_copy']:8.2f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
