#!/usr/bin/env python3
"""h200_summary.py DIR: the dispatch and submit results of one bench/h200.sh run side by side
(nuvec, hand-written Vulkan, CUDA stream, CUDA graph, PyTorch eager), with nuvec's ratio to each,
from DIR/dispatch.json, submit.json, cuda.json and torch.json (any may be missing)."""
import json
import os
import sys


def load(d, name):
    try:
        with open(os.path.join(d, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def get(doc, *path):
    for p in path:
        if not isinstance(doc, dict) or doc.get(p) is None:
            return None
        doc = doc[p]
    return doc


def cell(v, nuvec):
    if v is None:
        return "-"
    text = f"{v:.3f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"
    if nuvec is not None and v > 0:
        text += f" ({nuvec / v:.2f}x)"
    return text


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "h200-out"
    disp, sub, cuda, torch = (load(d, n) for n in ("dispatch", "submit", "cuda", "torch"))
    cols = ["nuvec", "Vulkan (hand)", "CUDA stream", "CUDA graph", "PyTorch eager"]
    rows = []
    for pat in ("dependent", "independent"):
        nu = get(disp, "results", pat, "record_ns_per_dispatch", "nuvec")
        vk = get(disp, "results", pat, "record_ns_per_dispatch", "vulkan")
        cs = get(cuda, "results", pat, "stream_cpu_us_per_launch")
        tc = get(torch, "results", pat, "cpu_us_per_op")
        nu = nu / 1e3 if nu is not None else None
        rows.append((f"CPU per dispatch/launch, {pat}", [nu, vk / 1e3 if vk is not None else None, cs, None, tc]))
    for pat in ("dependent", "independent"):
        rows.append((f"GPU per dispatch, {pat}", [
            get(disp, "results", pat, "gpu_us_per_dispatch", "nuvec"),
            get(disp, "results", pat, "gpu_us_per_dispatch", "vulkan"),
            get(cuda, "results", pat, "stream_gpu_us_per_launch"),
            get(cuda, "results", pat, "graph_gpu_us_per_node"),
            get(torch, "results", pat, "gpu_us_per_op"),
        ]))
    rows.append(("round trip, one small dispatch", [
        get(sub, "results", "nuvec", "median_us"),
        get(sub, "results", "vulkan_fence", "median_us"),
        get(cuda, "results", "launch_sync", "median_us"),
        None,
        get(torch, "results", "op_sync", "median_us"),
    ]))
    nu_rt = get(sub, "results", "nuvec", "median_us")
    rows.append(("  Vulkan: resubmit + timeline spin", [
        nu_rt, get(sub, "results", "vulkan_timeline_spin", "median_us"), None, None, None]))
    rows.append(("  Vulkan: resubmit + vkWaitSemaphores", [
        nu_rt, get(sub, "results", "vulkan_timeline_wait", "median_us"), None, None, None]))

    name = get(disp, "device", "name") or get(sub, "device", "name") or get(cuda, "device", "name") or "?"
    print(f"Summary on {name}: microseconds (median); in parentheses nuvec / that column")
    print("(CPU: recording for nuvec and Vulkan, the launch call for CUDA, the Python op for PyTorch;")
    print(" round trip: nuvec new+dispatch+commit+wait+free, Vulkan resubmit + vkWaitForFences (then a")
    print(" timeline-semaphore spin and a blocking vkWaitSemaphores), CUDA launch + cudaStreamSynchronize,")
    print(" PyTorch op + torch.cuda.synchronize)\n")
    widths = [40] + [20] * len(cols)
    print(f"{'':{widths[0]}}" + "".join(f" | {c:>{w}}" for c, w in zip(cols, widths[1:])))
    print("-" * (widths[0] + sum(w + 3 for w in widths[1:])))
    for label, vals in rows:
        nu = vals[0]
        cells = [cell(vals[0], None)] + [cell(v, nu) for v in vals[1:]]
        print(f"{label:{widths[0]}}" + "".join(f" | {c:>{w}}" for c, w in zip(cells, widths[1:])))
    t = get(disp, "targets") or {}
    s = get(sub, "targets") or {}

    def verdict(v):
        return "n/a" if v is None else "met" if v else "NOT met"
    print(f"\nTargets: record <= 1.2x hand-written: {verdict(t.get('record_ratio_met'))}; "
          f"record <= 0.5 us: {verdict(t.get('record_ns_met'))}; GPU <= 1.05x hand-written: "
          f"{verdict(t.get('gpu_ratio_met'))}; barriers exact: {verdict(t.get('barriers_met'))}; "
          f"round trip <= 15 us: {verdict(s.get('nuvec_us_met'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
