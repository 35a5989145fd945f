#!/usr/bin/env python3
"""trace_table.py TRACE.json [--pass-start NAME] [--passes N] [--with NAME]: a table of where the GPU
time of a nuvec trace (NUVEC_TRACE=FILE.json, nuvec/trace.h) went.

Per kernel name: count, total and mean microseconds, and the share of the GPU span. Then, for the
last N passes of a repeating program (a pass starts at each event named --pass-start, default
the model's first op "gather"), the mean time of each op in pass order and the mean gap before it
(the barrier and ramp between dependent dispatches), so that a decode step's layer reads as a list,
and those passes' time by kernel. --with NAME keeps only the passes that run a kernel of that name
(attn_decode_sg: a batched decode step's, where many prompts' prefill passes outnumber them).
Only GPU events of the compute queue count (tid 1)."""
import argparse
import collections
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--pass-start", default="gather")
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--rows", type=int, default=60, help="op rows of the pass table (0: all)")
    ap.add_argument("--with", dest="with_op", help="only passes running a kernel of this name")
    a = ap.parse_args()
    try:
        with open(a.trace) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"trace_table: {a.trace}: {e}")
    gpu = sorted((e for e in events if e.get("ph") == "X" and e.get("tid") == 1), key=lambda e: e["ts"])
    if not gpu:
        sys.exit(f"trace_table: {a.trace} has no compute-queue GPU events")
    span = gpu[-1]["ts"] + gpu[-1]["dur"] - gpu[0]["ts"]
    by = collections.defaultdict(lambda: [0, 0.0])
    for e in gpu:
        by[e["name"]][0] += 1
        by[e["name"]][1] += e["dur"]
    busy = sum(v[1] for v in by.values())
    print(f"{len(gpu)} GPU events over {span:.1f} us; busy {busy:.1f} us ({100 * busy / span:.0f}%)")
    print(f"| kernel | count | total us | mean us | of span |")
    print(f"| --- | ---: | ---: | ---: | ---: |")
    for name, (n, t) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"| {name} | {n} | {t:.1f} | {t / n:.2f} | {100 * t / span:.1f}% |")

    starts = [i for i, e in enumerate(gpu) if e["name"] == a.pass_start]
    if len(starts) < 2:
        return
    passes = [gpu[s:t] for s, t in zip(starts, starts[1:] + [len(gpu)])]
    if a.with_op:
        passes = [p for p in passes if any(e["name"] == a.with_op for e in p)]
        if not passes:
            sys.exit(f"trace_table: no pass from '{a.pass_start}' runs '{a.with_op}'")
    # the last passes of the most common length (decode steps; prefill passes differ)
    length = collections.Counter(len(p) for p in passes).most_common(1)[0][0]
    same = [p for p in passes if len(p) == length][-a.passes:]
    print(f"\nlast {len(same)} passes of {length} ops (from '{a.pass_start}'): mean per op")
    total_pass = sum(p[-1]["ts"] + p[-1]["dur"] - p[0]["ts"] for p in same) / len(same)
    print(f"pass span {total_pass:.1f} us")
    print("| # | op | mean us | gap before us |")
    print("| ---: | --- | ---: | ---: |")
    rows = range(length) if a.rows == 0 else range(min(length, a.rows))
    for i in rows:
        dur = sum(p[i]["dur"] for p in same) / len(same)
        gap = sum(p[i]["ts"] - (p[i - 1]["ts"] + p[i - 1]["dur"]) for p in same) / len(same) if i else 0.0
        print(f"| {i} | {same[0][i]['name']} | {dur:.2f} | {gap:.2f} |")
    per = collections.defaultdict(lambda: [0, 0.0])
    for p in same:
        for e in p:
            per[e["name"]][0] += 1
            per[e["name"]][1] += e["dur"]
    print(f"\nthose passes by kernel (a pass's mean; the rest of the span is gaps)")
    print("| kernel | count | us | of span |")
    print("| --- | ---: | ---: | ---: |")
    for name, (n, t) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print(f"| {name} | {n // len(same)} | {t / len(same):.1f} | {100 * t / len(same) / total_pass:.1f}% |")


if __name__ == "__main__":
    main()
