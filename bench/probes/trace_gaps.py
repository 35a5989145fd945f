"""bench/probes/trace_gaps.py: per track of a nuvec trace (NUVEC_TRACE=FILE, Chrome trace-event
JSON), the events, how busy the track was over its span, the median event duration and the
median and 90th-percentile gaps between consecutive events. Used to find the transfer queue
idle between a move's copies (bench/RESULTS.md, 2026-11-30):
    NUVEC_TRACE=/tmp/t.json ./build/nuvec load FILE --to-gpu --quiet
    python3 bench/probes/trace_gaps.py /tmp/t.json
"""
import json, sys, statistics as st
doc = json.load(open(sys.argv[1]))
ev = doc["traceEvents"] if isinstance(doc, dict) else doc
ev = [e for e in ev if e.get("ph") == "X"]
by = {}
for e in ev:
    by.setdefault(e["tid"], []).append(e)
for tid, es in sorted(by.items()):
    es.sort(key=lambda e: e["ts"])
    names = {}
    for e in es:
        names[e["name"]] = names.get(e["name"], 0) + 1
    dur = [e["dur"] for e in es]
    gaps = [es[i + 1]["ts"] - (es[i]["ts"] + es[i]["dur"]) for i in range(len(es) - 1)]
    span = es[-1]["ts"] + es[-1]["dur"] - es[0]["ts"]
    busy = sum(dur)
    track = {1: "compute queue", 2: "transfer queue", 3: "CPU"}.get(tid, f"tid {tid}")
    print(f"{track}: {len(es)} events {dict(list(names.items())[:6])}")
    print(f"   span {span/1e3:.1f} ms busy {busy/1e3:.1f} ms ({100*busy/span:.0f}%), dur median {st.median(dur):.1f} us, gap median {st.median(gaps) if gaps else 0:.1f} us p90 {sorted(gaps)[int(len(gaps)*0.9)] if gaps else 0:.1f}")
