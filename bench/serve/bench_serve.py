#!/usr/bin/env python3
"""bench/serve/bench_serve.py: `nuvec serve` against llama.cpp's llama-server, the same prompts.

Each server is started on 127.0.0.1 (a free port) with the same slots and context, then driven
by C concurrent streaming clients (default 1, 8 and 32) sending R requests each round
(/v1/completions with prompts of P token ids drawn from a seeded generator, the same for both, stream, temperature 0, ignore_eos so every request generates --max-tokens).
Per round: aggregate decode tokens/s (completion tokens of the round over its wall time) and time
to first token (p50, p99, from sending the request to its first text), after an untimed round at the
most clients and one prompt of the prefix test's length (--warmup 0: none). Then the prefix test: a
request with a --prefix-token shared prefix, then another that shares it (different ends): the
second's time to first token against the first's (the prefix cache should make it >= 5x sooner).

llama-server comes from bench/llamacpp.sh (fetch, build, server: nothing of it is committed).
Usage:
  bench/serve/bench_serve.py --model MODEL.gguf [--nuvec build/nuvec] [--llama-server .peer/dist/llama-server]
      [--servers nuvec,llama] [--clients 1,8,32] [--requests R] [--prompt-tokens P] [--max-tokens T]
      [--parallel 32] [--ctx N] [--prefix-tokens 2000] [--timeout S] [--warmup 0|1] [--json FILE]
One JSON object a round on stdout ({"server", "clients", "requests", "decode_tps", "ttft_p50_ms",
"ttft_p99_ms", ...}), the prefix test's too, then a summary of the targets (>= 1.5x llama-server's
throughput at 8 and 32 clients, p50 time to first token no worse, prefix >= 5x) when both ran.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(kind, args, port):
    if kind == "nuvec":
        cmd = [args.nuvec, "serve", args.model, "--port", str(port), "--parallel", str(args.parallel),
               "--ctx", str(args.ctx), "--queue", str(max(64, 2 * max(args.clients)))]
    else:
        # -np slots sharing -c (llama-server splits the context between them): ctx a slot times slots.
        cmd = [args.llama_server, "-m", args.model, "--host", "127.0.0.1", "--port", str(port), "-np", str(args.parallel),
               "-c", str(args.ctx * args.parallel), "-ngl", "99", "-fa", "on", "--no-webui", "-cb"]
    log = open(f"/tmp/bench_serve_{kind}.log", "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    end = time.time() + args.timeout
    while time.time() < end:
        if p.poll() is not None:
            raise RuntimeError(f"{kind} exited with {p.returncode}: see /tmp/bench_serve_{kind}.log")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return p
        except OSError:
            pass
        time.sleep(0.25)
    p.kill()
    raise RuntimeError(f"{kind} was not healthy within {args.timeout} s")


def stop(p):
    p.terminate()
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()


def one(port, prompt, max_tokens, timeout):
    """Sends one streamed completion; returns (time to first text, seconds, completion tokens)."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "ignore_eos": True, "stream_options": {"include_usage": True}}).encode()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"status {r.status}: {r.read()[:300]}")
    first, chunks, usage, buf = None, 0, None, b""
    while True:
        k = r.read1(65536)
        if not k:
            break
        buf += k
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            if not ev.startswith(b"data: ") or ev == b"data: [DONE]":
                continue
            o = json.loads(ev[6:])
            if o.get("usage"):
                usage = o["usage"]
            for ch in o.get("choices") or []:
                if ch.get("text"):
                    chunks += 1
                    if first is None:
                        first = time.perf_counter() - t0
    c.close()
    n = usage["completion_tokens"] if usage else chunks
    return first if first is not None else time.perf_counter() - t0, time.perf_counter() - t0, n


def vocab_of(port):
    """The vocabulary's size from /v1/models (both servers give meta.n_vocab)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/v1/models")
    try:
        return int(json.loads(c.getresponse().read())["data"][0]["meta"]["n_vocab"])
    except (KeyError, IndexError, ValueError):
        return 32000


def prompt_of(rng, n, vocab):
    """n token ids (the same for both servers: prompts as ids, no tokenizer in between)."""
    return [rng.randrange(3, vocab) for _ in range(n)]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def round_(kind, port, clients, args, rng, vocab):
    prompts = [prompt_of(rng, args.prompt_tokens, vocab) for _ in range(args.requests or 4 * clients)]
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        res = list(pool.map(lambda p: one(port, p, args.max_tokens, args.timeout), prompts))
    wall = time.perf_counter() - t0
    ttft = [r[0] for r in res]
    tokens = sum(r[2] for r in res)
    return {"server": kind, "clients": clients, "requests": len(res), "completion_tokens": tokens,
            "wall_s": round(wall, 3), "decode_tps": round(tokens / wall, 2),
            "ttft_p50_ms": round(1e3 * statistics.median(ttft), 2), "ttft_p99_ms": round(1e3 * pct(ttft, 0.99), 2)}


def prefix_test(kind, port, args, rng, vocab):
    shared = prompt_of(rng, args.prefix_tokens, vocab)
    a = one(port, shared + prompt_of(rng, 8, vocab), 4, args.timeout)
    b = one(port, shared + prompt_of(rng, 8, vocab), 4, args.timeout)
    return {"server": kind, "test": "prefix", "prefix_tokens": args.prefix_tokens, "first_ttft_ms": round(a[0] * 1e3, 2),
            "second_ttft_ms": round(b[0] * 1e3, 2), "speedup": round(a[0] / b[0], 2) if b[0] > 0 else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--nuvec", default=f"{ROOT}/build/nuvec")
    ap.add_argument("--llama-server", default=f"{ROOT}/.peer/dist/llama-server")
    ap.add_argument("--servers", default="nuvec,llama")
    ap.add_argument("--clients", default="1,8,32", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--requests", type=int, default=0, help="requests a round (default 4 a client)")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--parallel", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=2560, help="positions a slot holds")
    ap.add_argument("--prefix-tokens", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--warmup", type=int, default=1, help="1: an untimed round and long prompt first (0: none)")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    results = []
    for kind in args.servers.split(","):
        port = free_port()
        p = start(kind, args, port)
        try:
            rng = random.Random(1)  # the same prompts for both servers
            vocab = vocab_of(port)
            one(port, prompt_of(rng, 8, vocab), 4, args.timeout)  # warm-up
            if args.warmup:
                # Untimed: a round at the most clients and a prompt of the prefix test's length (other
                # tokens), so that neither server's first timed requests pay for kernels it builds on
                # first use of a batch shape (llama.cpp's Vulkan backend compiles its pipelines then).
                warm = random.Random(2)
                round_(kind, port, max(args.clients), args, warm, vocab)
                if args.prefix_tokens:
                    one(port, prompt_of(warm, args.prefix_tokens + 8, vocab), 4, args.timeout)
            for c in args.clients:
                results.append(round_(kind, port, c, args, rng, vocab))
                print(json.dumps(results[-1]), flush=True)
            if args.prefix_tokens:
                results.append(prefix_test(kind, port, args, rng, vocab))
                print(json.dumps(results[-1]), flush=True)
        finally:
            stop(p)
    by = {(r["server"], r.get("clients"), r.get("test")): r for r in results}
    summary = {}
    for c in args.clients:
        n, l = by.get(("nuvec", c, None)), by.get(("llama", c, None))
        if n and l:
            summary[f"throughput_ratio_{c}"] = round(n["decode_tps"] / l["decode_tps"], 3)
            summary[f"ttft_p50_ratio_{c}"] = round(n["ttft_p50_ms"] / l["ttft_p50_ms"], 3)
    if ("nuvec", None, "prefix") in by:
        summary["nuvec_prefix_speedup"] = by[("nuvec", None, "prefix")]["speedup"]
    targets = {}
    if all(f"throughput_ratio_{c}" in summary for c in (8, 32)):
        targets["throughput_1.5x_at_8_and_32"] = all(summary[f"throughput_ratio_{c}"] >= 1.5 for c in (8, 32))
    if any(k.startswith("ttft_p50_ratio") for k in summary):
        targets["ttft_p50_no_worse"] = all(v <= 1.0 for k, v in summary.items() if k.startswith("ttft_p50_ratio"))
    if "nuvec_prefix_speedup" in summary:
        targets["prefix_5x"] = (summary["nuvec_prefix_speedup"] or 0) >= 5
    if summary:
        summary["targets"] = targets
        print(json.dumps({"summary": summary}), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
