#!/usr/bin/env python3
"""check_generate.py NUVEC MODELS_DIR: `nuvec generate` end to end on the tiny models (their README's
greedy ids and text, greedy on the GPU as with --no-graph), its --tokens and sampling options, --devices
(a layer split over the same device opened several times: the same ids), `nuvec
bench llm`'s two decode figures (the same ids), its refusals (exit status 2 for bad
arguments, 1 with a message for a bad model), and a reader of its output that goes away (exit
status 1, the trace still written)."""
import json
import os
import subprocess
import sys
import tempfile

from checks import check, closed_reader, status

nuvec, models = sys.argv[1], sys.argv[2]


def run(*args):
    p = subprocess.run([nuvec, "generate", *args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


dream = [429, 464, 448, 464, 464, 464, 464, 464, 464, 448, 429, 468, 342, 358, 402, 327, 446, 299, 303, 266,
         437, 443, 434, 438, 451, 306, 443, 259, 430, 446, 299, 303, 266, 437, 443, 434, 438, 451, 306, 443]
rc, out, err = run(f"{models}/aidreams260K/hf", "--prompt", "I dream of", "-n", "40", "--json")
check(rc == 0, f"--json run: rc {rc}: {err}")
if rc == 0:
    o = json.loads(out)
    check(o["prompt_tokens"] == [1, 303, 281, 269, 435, 447, 275], f"prompt_tokens {o['prompt_tokens']}")
    check(o["tokens"] == dream, f"tokens {o['tokens']}")
    check(o["text"] == " 0.000000. Dimensions unfold, as I softly refine, as I softly ref", f"text {o['text']!r}")
    check(o["prefill_tokens_per_s"] > 0 and o["decode_tokens_per_s"] > 0, "tokens/s")
    mem = o.get("device_memory", {})
    check(mem.get("total", 0) == mem.get("weights", 0) + mem.get("kv_cache", 0) + mem.get("activations", 0) > 0
          and mem.get("weights", 0) >= 923904 and mem.get("decode_peak", 0) >= mem.get("total", 1),
          f"device_memory {mem}")
rc, out, err = run(f"{models}/aidreams260K/hf", "--prompt", "I dream of", "-n", "40")
check(rc == 0 and out == "I dream of 0.000000. Dimensions unfold, as I softly refine, as I softly ref\n",
      f"streamed text {out!r} rc {rc}")
rc, out, err = run(f"{models}/aidreams260K/hf", "--tokens", "1,303,281,269,435,447,275", "-n", "5", "--json", "--no-graph")
check(rc == 0 and json.loads(out)["tokens"] == dream[:5], f"--tokens --no-graph: {out} {err}")
# Greedy runs by nu_llm_model_decode_greedy (ids on the GPU) with the graph; --no-graph reads the logits
# back each token: the same 40 ids and text, and -n 1 (no decode) and -n 2 (one token decoded).
rc, out, err = run(f"{models}/aidreams260K/hf", "--prompt", "I dream of", "-n", "40", "--no-graph")
check(rc == 0 and out == "I dream of 0.000000. Dimensions unfold, as I softly refine, as I softly ref\n",
      f"--no-graph streamed text {out!r} rc {rc}")
for k in (1, 2):
    rc, out, err = run(f"{models}/aidreams260K/hf", "--prompt", "I dream of", "-n", str(k), "--json")
    check(rc == 0 and json.loads(out)["tokens"] == dream[:k], f"-n {k}: {out} {err}")
runs = [run(f"{models}/stories260K/model.gguf", "-n", "60", "--json", *extra) for extra in ([], ["--no-graph"])]
check(all(r[0] == 0 for r in runs) and json.loads(runs[0][1])["tokens"] == json.loads(runs[1][1])["tokens"]
      and len(json.loads(runs[0][1])["tokens"]) == 60, f"stories greedy, graph against --no-graph: {runs}")
# GGUF: the F32 file and the Q8_0 one give the same ids here (test_llm_model checks how near).
for f in ("model.gguf", "model-q8_0.gguf"):
    rc, out, err = run(f"{models}/aidreams260K/{f}", "--prompt", "I dream of", "-n", "40", "--json")
    check(rc == 0 and json.loads(out)["tokens"] == dream, f"{f}: rc {rc}: {out} {err}")
# Sampling: the same seed gives the same tokens, and 40 of them (no EOS in this model's run).
runs = [run(f"{models}/aidreams260K/hf", "--prompt", "I remember", "-n", "20", "--temp", "0.9", "--top-k", "20",
            "--top-p", "0.95", "--seed", "5", "--json") for _ in range(2)]
check(all(r[0] == 0 for r in runs) and json.loads(runs[0][1])["tokens"] == json.loads(runs[1][1])["tokens"],
      "same seed, same tokens")
# A reader that goes away (`| head -1`; here it is gone before the first write, so that no write can
# land first): generate stops with a message and exit status 1 (SIGPIPE ignored, not killed by it)
# and still closes the model, so NUVEC_TRACE's file is written; with text (aidreams260K) and with ids
# (stories260K).
for model, extra in ((f"{models}/aidreams260K/hf", ["--prompt", "I dream of"]), (f"{models}/stories260K/model.gguf", [])):
    trace = os.path.join(tempfile.mkdtemp(prefix="nuvec-pipe-"), "trace.json")
    w = closed_reader()
    p = subprocess.Popen([nuvec, "generate", model, *extra, "-n", "20"], stdout=w, stderr=subprocess.PIPE,
                         env={**os.environ, "NUVEC_TRACE": trace})
    os.close(w)
    try:
        err = p.communicate(timeout=300)[1].decode(errors="replace")
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        rc, err = None, "timed out"
    trace_ok = False
    try:
        with open(trace) as f:
            trace_ok = bool(json.load(f))
    except (OSError, ValueError):
        pass
    check(rc == 1 and "standard output" in err and trace_ok,
          f"{model}: output closed: rc {rc}, stderr {err[-200:]!r}, trace written {trace_ok}")
# stories260K has no tokenizer: ids are streamed, text is null; --prompt is refused.
rc, out, err = run(f"{models}/stories260K/hf", "-n", "3", "--json")
check(rc == 0 and json.loads(out)["text"] is None and json.loads(out)["prompt_tokens"] == [1], f"stories: {out} {err}")
rc, out, err = run(f"{models}/stories260K/hf", "--prompt", "hi")
check(rc == 1 and "tokenizer" in err, f"--prompt without a tokenizer: rc {rc}: {err}")
for bad in (["--temp"], ["-n", "x"], ["--tokens", "1,x"], ["--prompt", "a", "--tokens", "1"], ["--frobnicate"], []):
    rc, out, err = run(*([f"{models}/aidreams260K/hf"] if bad != [] else []), *bad)
    check(rc in (1, 2) and err, f"{bad}: rc {rc}")
# --devices: the model split by layers over the same device opened two and three times gives the same
# ids and text (test_llm_split checks the logits bit for bit), and says the split on stderr; bad lists
# are refused with exit status 2 and a message.
for devices, weights in (("0,0", []), ("0,0,0", ["--split-weights", "1,2,1"])):
    rc, out, err = run(f"{models}/aidreams260K/hf", "--prompt", "I dream of", "-n", "40", "--json", "--devices", devices,
                       *weights, "--split", "layer")
    check(rc == 0 and json.loads(out)["tokens"] == dream and "layers 0-" in err, f"--devices {devices}: rc {rc}: {err}")
for bad in (["--devices", "0,0", "--device", "0"], ["--devices", "0,,0"], ["--devices", "0,0", "--split", "tensor"],
            ["--devices", "0,0", "--split-weights", "1"], ["--devices", "0,0", "--split-weights", "1,-2"],
            ["--split-weights", "1,1"]):
    rc, out, err = run(f"{models}/aidreams260K/hf", "-n", "2", *bad)
    check(rc == 2 and "nuvec generate:" in err, f"{bad}: rc {rc}: {err[:200]}")
rc, out, err = run(f"{models}/aidreams260K/hf", "-n", "2", "--devices", "0,99")
check(rc == 1 and "device 99" in err, f"--devices 0,99: rc {rc}: {err[:200]}")
# `nuvec bench llm` times greedy decode both ways (ids on the GPU; logits read back): same ids.
p = subprocess.run([nuvec, "bench", "llm", "--model", f"{models}/stories260K/model.gguf", "-p", "4", "-n", "20", "--json"],
                   capture_output=True, text=True, timeout=600)
check(p.returncode == 0, f"bench llm: rc {p.returncode}: {p.stderr}")
if p.returncode == 0:
    o = json.loads(p.stdout)
    check(o["decode_ids_match"] is True and o["decode_tokens_per_s"] > 0 and o["decode_readback_tokens_per_s"] > 0,
          f"bench llm: {o}")
    check(o.get("device_memory", {}).get("prefill_peak", 0) > 0, f"bench llm device_memory: {o}")
p = subprocess.run([nuvec, "bench", "llm", "--model", f"{models}/stories260K/model.gguf", "-p", "4", "-n", "8",
                    "--devices", "0,0"], capture_output=True, text=True, timeout=600)
check(p.returncode == 0 and "split by layers: layers 0-" in p.stdout and "split over devices" in p.stdout,
      f"bench llm --devices: rc {p.returncode}: {p.stdout} {p.stderr}")
# `nuvec bench llm --batch`: B sequences at once, prefilled through nu_llm_model_step, decoded through
# nu_llm_model_step_greedy (--by-step: nu_llm_model_step a step).
p = subprocess.run([nuvec, "bench", "llm", "--model", f"{models}/stories260K/model.gguf", "-p", "4", "-n", "3",
                    "--batch", "1,3", "--json"], capture_output=True, text=True, timeout=600)
check(p.returncode == 0, f"bench llm --batch: rc {p.returncode}: {p.stderr}")
if p.returncode == 0:
    check(json.loads(p.stdout)["decode_by"] == "nu_llm_model_step_greedy", f"bench llm --batch: {p.stdout}")
    b = json.loads(p.stdout)["batches"]
    check([x["sequences"] for x in b] == [1, 3] and all(x["decode_tokens_per_s"] > 0 for x in b),
          f"bench llm --batch: {b}")
    want = [sum(4 - i * 4 // (2 * B) for i in range(B)) for B in (1, 3)]  # sequence i: -p (1 - i / (2 B))
    check([x["prompt_rows"] for x in b] == want, f"bench llm --batch prompts (-p down to -p / 2): {b}, want {want}")
# --same-prompts: every prompt -p long (llama.cpp's batched-bench's -npp); refused without --batch.
p = subprocess.run([nuvec, "bench", "llm", "--model", f"{models}/stories260K/model.gguf", "-p", "4", "-n", "3",
                    "--batch", "3", "--same-prompts", "--json"], capture_output=True, text=True, timeout=600)
check(p.returncode == 0, f"bench llm --same-prompts: rc {p.returncode}: {p.stderr}")
if p.returncode == 0:
    o = json.loads(p.stdout)
    check(o["same_prompts"] is True and [x["prompt_rows"] for x in o["batches"]] == [12],
          f"bench llm --same-prompts: {o}")
p = subprocess.run([nuvec, "bench", "llm", "--model", f"{models}/stories260K/model.gguf", "--same-prompts"],
                   capture_output=True, text=True, timeout=600)
check(p.returncode == 2 and "--batch" in p.stderr, f"--same-prompts without --batch: rc {p.returncode}: {p.stderr}")
p = subprocess.run([nuvec, "bench", "llm", "--model", f"{models}/stories260K/model.gguf", "-p", "4", "-n", "4",
                    "--batch", "2", "--by-step", "--json"], capture_output=True, text=True, timeout=600)
check(p.returncode == 0 and json.loads(p.stdout or "{}").get("decode_by") == "nu_llm_model_step"
      and json.loads(p.stdout)["batches"][0]["decode_tokens_per_s"] > 0, f"bench llm --by-step: {p.returncode}: {p.stderr}")
p = subprocess.run([nuvec, "bench", "llm", "--model", f"{models}/stories260K/model.gguf", "--by-step"],
                   capture_output=True, text=True, timeout=600)
check(p.returncode == 2 and "--batch" in p.stderr, f"--by-step without --batch: rc {p.returncode}: {p.stderr}")
# --max-memory: a model that needs more is refused, saying what it needs.
rc, out, err = run(f"{models}/aidreams260K/model.gguf", "-n", "3", "--max-memory", "100000")
check(rc == 1 and "needs" in err and "max_memory" in err, f"--max-memory: rc {rc}: {err}")
rc, out, err = run(f"{models}/aidreams260K/model.gguf", "-n", "3", "--max-memory", "100000000")
check(rc == 0, f"--max-memory that fits: rc {rc}: {err}")
rc, out, err = run(f"{models}/no_such_model")
check(rc == 1 and "config.json" in err, f"missing model: rc {rc}: {err}")
rc, out, err = run(f"{models}/aidreams260K/hf", "--tokens", "1,9999")
check(rc == 1 and "9999" in err, f"bad id: rc {rc}: {err}")
sys.exit(status())
