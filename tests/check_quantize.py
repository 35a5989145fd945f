#!/usr/bin/env python3
"""check_quantize.py NUVEC MODELS_DIR: `nuvec quantize` end to end. make-gguf files quantized to
llama-quantize's file types: the output opens (a GGUF reader written here), has general.file_type and
general.quantization_version, the per-tensor types of llama-quantize's mix (rows of 256 and of 64 / 128,
where the fallbacks apply), the input's metadata, and values within the format's error of the input (read
back as F32 through `nuvec quantize --type f32 --allow-requantize`). aidreams260K's GGUF file and its Hugging
Face folder: the folder's F32 output holds model.gguf's tensors bit for bit (the q/k rows permuted back),
its tokenizer, and generates the same ids. Refusals: exit status 2 for bad arguments, 1 with a message for
bad input, and never an OUT (or a partial one) left behind."""
import array
import glob
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

from checks import check, failures, status

nuvec, models = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="quantize-", dir=os.environ.get("NUVEC_TEST_TMP"))


def run(*args):
    p = subprocess.run([nuvec, *args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


# ---- a GGUF reader: metadata and tensor infos (shapes innermost first, as in the file) ----
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
TYPES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 12: "q4_K", 13: "q5_K",
         14: "q6_K", 20: "iq4_nl", 23: "iq4_xs", 30: "bf16"}


def read_gguf(path):
    with open(path, "rb") as f:
        b = f.read()
    at = 4  # past the magic

    def take(fmt):
        nonlocal at
        v = struct.unpack_from(fmt, b, at)[0]
        at += struct.calcsize(fmt)
        return v

    def string():
        nonlocal at
        n = take("<Q")
        at += n
        return b[at - n:at].decode("utf-8", "replace")

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<I"), take("<Q")
            return [value(et) for _ in range(n)]
        return take(SCALARS[t])

    assert b[:4] == b"GGUF", path
    version, nt, nkv = take("<I"), take("<Q"), take("<Q")
    kv = {}
    for _ in range(nkv):
        k = string()
        kv[k] = value(take("<I"))
    tensors = {}
    for _ in range(nt):
        name = string()
        dims = [take("<Q") for _ in range(take("<I"))]
        tensors[name] = {"dims": dims, "type": TYPES.get(take("<I"), "?"), "offset": take("<Q")}
    align = kv.get("general.alignment", 32)
    data = (at + align - 1) // align * align
    for t in tensors.values():
        t["at"] = data + t["offset"]
    return version, kv, tensors, b


def f32_values(path):
    """Every tensor of an all-F32 file, as arrays of floats."""
    _, _, tensors, b = read_gguf(path)
    out = {}
    for name, t in tensors.items():
        assert t["type"] == "f32", (path, name, t["type"])
        n = math.prod(t["dims"])
        out[name] = array.array("f", b[t["at"]:t["at"] + 4 * n])
    return out


def no_leftovers(out, what):
    check(not os.path.exists(out), f"{what}: {out} was left behind")
    check(not glob.glob(out + ".partial-*"), f"{what}: a partial {out} was left behind")


# Relative RMS error at most, on make-gguf's normal weights (docs/quantize.md's table, with room).
BOUND = {"q4_K": 0.078, "q5_K": 0.039, "q6_K": 0.020, "q8_0": 0.0056, "q4_0": 0.09, "q4_1": 0.078, "q5_0": 0.045,
         "q5_1": 0.038, "iq4_nl": 0.085, "iq4_xs": 0.085, "f16": 0.0003, "bf16": 0.0025, "f32": 0}

# ---- make-gguf files: rows of 256 (small) and of 64 / 128 (tiny) ----
small, tiny = f"{tmp}/small-f32.gguf", f"{tmp}/tiny-f16.gguf"
for shape, dtype, path in (("small", "f32", small), ("tiny", "f16", tiny)):
    rc, out, err = run("make-gguf", "--shape", shape, "--dtype", dtype, "--layers", "8", "--out", path, "--seed", "7")
    check(rc == 0, f"make-gguf {shape}: {err}")
small_f32 = f32_values(small)
_, small_kv, _, _ = read_gguf(small)
more_bits = {0, 3, 6, 7}  # of 8 layers: the first and last eighth, and those with (l - 1) % 3 == 2
EXPECT = {  # file type -> (its number, the type of a tensor by kind, for small's rows of 256 and 512)
    "q4_k_m": (15, lambda kind, l: "q6_K" if kind == "output" or (kind in ("attn_v", "ffn_down") and l in more_bits)
               else "q4_K"),
    "q4_k_s": (14, lambda kind, l: "q6_K" if kind == "output" else "q5_K" if (kind == "attn_v" and l < 4) or
               (kind == "ffn_down" and l < 1) else "q4_K"),
    "q5_k_m": (17, lambda kind, l: "q6_K" if kind == "output" or (kind in ("attn_v", "ffn_down") and l in more_bits)
               else "q5_K"),
    "q6_k": (18, lambda kind, l: "q6_K"),
    "q8_0": (7, lambda kind, l: "q8_0"),
    "q4_0": (2, lambda kind, l: "q6_K" if kind == "output" else "q4_0"),
    "iq4_xs": (30, lambda kind, l: "q6_K" if kind == "output" else "q5_K" if kind == "ffn_down" and l < 1 else "iq4_xs"),
    "bf16": (32, lambda kind, l: "bf16"),
}


def kind_of(name):
    if name == "output.weight":
        return "output", -1
    if name == "token_embd.weight":
        return "token_embd", -1
    parts = name.split(".")
    return (parts[2], int(parts[1])) if parts[0] == "blk" else (parts[0], -1)


for ftype, (number, rule) in EXPECT.items():
    out = f"{tmp}/small-{ftype}.gguf"
    rc, stdout, err = run("quantize", small, out, "--type", ftype.upper() if ftype == "q4_k_m" else ftype, "--threads", "2")
    check(rc == 0, f"{ftype}: rc {rc}: {err}")
    if rc:
        continue
    version, kv, tensors, _ = read_gguf(out)
    check(version == 3 and kv.get("general.file_type") == number and kv.get("general.quantization_version") == 2,
          f"{ftype}: version {version}, file type {kv.get('general.file_type')}, quantization version "
          f"{kv.get('general.quantization_version')}")
    same = {k: v for k, v in kv.items() if k not in ("general.file_type", "general.quantization_version")}
    check(same == {k: v for k, v in small_kv.items() if k not in ("general.file_type", "general.quantization_version")},
          f"{ftype}: the metadata did not come through as it was")
    for name, t in tensors.items():
        kind, layer = kind_of(name)
        want = "f32" if kind.endswith("_norm") or name == "output_norm.weight" else rule(kind, layer)
        check(t["type"] == want, f"{ftype}: {name} is {t['type']}, expected {want}")
    back = f"{tmp}/small-{ftype}-back.gguf"
    rc, _, err = run("quantize", out, back, "--type", "f32", "--allow-requantize")
    check(rc == 0, f"{ftype} back to f32: {err}")
    if rc:
        continue
    values = f32_values(back)
    for name, x in small_f32.items():
        if kind_of(name)[1] not in (-1, 0, 7):
            continue  # two layers of eight are enough here, and Python is slow
        y = values[name]
        se = sum((a - b) * (a - b) for a, b in zip(x, y))
        sx = sum(a * a for a in x)
        bound = BOUND[tensors[name]["type"]]
        check(math.sqrt(se / sx) <= bound, f"{ftype}: {name} ({tensors[name]['type']}) has relative RMS error "
              f"{math.sqrt(se / sx):.5f} > {bound}")
    os.remove(back)

# tiny: rows of 64 and 128 take the fallbacks; its output (untied) Q8_0.
rc, stdout, err = run("quantize", tiny, f"{tmp}/tiny-q4_k_m.gguf", "--type", "q4_k_m")
check(rc == 0, f"tiny q4_k_m: {err}")
if rc == 0:
    _, _, tensors, _ = read_gguf(f"{tmp}/tiny-q4_k_m.gguf")
    for name, t in tensors.items():
        kind, layer = kind_of(name)
        want = "f32" if "norm" in name else "q8_0" if kind == "output" or (kind in ("attn_v", "ffn_down") and layer in more_bits) \
            else "q5_0"
        check(t["type"] == want, f"tiny q4_k_m: {name} is {t['type']}, expected {want}")
    check("fallback from Q4_K: rows of 64" in stdout, f"tiny: the plan does not say why: {stdout[:400]}")

# ---- make-gguf --dtype TYPE: the file `nuvec quantize --type TYPE` makes of make-gguf's F16 file ----
for shape, ftype in (("small", "q4_k_m"), ("small", "q5_k_s"), ("tiny", "q4_k_m")):
    f16, via, direct = f"{tmp}/{shape}-f16.gguf", f"{tmp}/{shape}-{ftype}-via.gguf", f"{tmp}/{shape}-{ftype}-direct.gguf"
    rc, _, err = run("make-gguf", "--shape", shape, "--dtype", "f16", "--layers", "8", "--out", f16, "--seed", "7")
    rc2, _, err2 = run("quantize", f16, via, "--type", ftype, "--threads", "2")
    rc3, _, err3 = run("make-gguf", "--shape", shape, "--dtype", ftype, "--layers", "8", "--out", direct, "--seed", "7",
                       "--threads", "3")
    check(rc == rc2 == rc3 == 0, f"make-gguf --dtype {ftype} ({shape}): {err}{err2}{err3}")
    if rc or rc2 or rc3:
        continue
    _, kv_via, t_via, b_via = read_gguf(via)
    _, kv_direct, t_direct, b_direct = read_gguf(direct)
    check(kv_direct.get("general.name") == f"random {shape} {ftype}", f"{ftype}: name {kv_direct.get('general.name')}")
    kv_via.pop("general.name"), kv_direct.pop("general.name")
    check(kv_via == kv_direct, f"make-gguf --dtype {ftype} ({shape}): metadata differs from quantize's")
    check(list(t_via) == list(t_direct), f"make-gguf --dtype {ftype} ({shape}): tensors differ")
    for name in set(t_via) & set(t_direct):
        a, b = t_via[name], t_direct[name]
        check(a["dims"] == b["dims"] and a["type"] == b["type"] and a["offset"] == b["offset"],
              f"make-gguf --dtype {ftype} ({shape}): {name} is {b['type']} {b['dims']}, quantize's {a['type']} {a['dims']}")
    check(b_via[min(t["at"] for t in t_via.values()):] == b_direct[min(t["at"] for t in t_direct.values()):],
          f"make-gguf --dtype {ftype} ({shape}): the tensor data differs from quantize's")
rc, _, err = run("make-gguf", "--shape", "tiny", "--dtype", "q3_k", "--out", f"{tmp}/no.gguf")
check(rc == 2 and "unknown dtype 'q3_k'" in err and not os.path.exists(f"{tmp}/no.gguf"), f"make-gguf q3_k: rc {rc}: {err}")

# ---- the real model: GGUF and Hugging Face ----
aid = f"{models}/aidreams260K"
_, ref_kv, ref_t, ref_b = read_gguf(f"{aid}/model.gguf")
rc, _, err = run("quantize", f"{aid}/hf", f"{tmp}/hf-f32.gguf", "--type", "f32")
check(rc == 0 and err == "", f"hf f32: rc {rc}: {err}")
if rc == 0:
    _, kv, tensors, b = read_gguf(f"{tmp}/hf-f32.gguf")
    check(set(tensors) == set(ref_t), f"hf f32: tensors {sorted(set(tensors) ^ set(ref_t))} differ")
    for name in set(tensors) & set(ref_t):
        t, r = tensors[name], ref_t[name]
        n = 4 * math.prod(r["dims"])
        check(t["dims"] == r["dims"] and b[t["at"]:t["at"] + n] == ref_b[r["at"]:r["at"] + n],
              f"hf f32: {name} differs from model.gguf's")
    for k in ("general.architecture", "llama.block_count", "llama.embedding_length", "llama.feed_forward_length",
              "llama.attention.head_count", "llama.attention.head_count_kv", "llama.context_length",
              "llama.rope.dimension_count", "llama.vocab_size", "tokenizer.ggml.model", "tokenizer.ggml.tokens",
              "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
              "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_bos_token"):
        check(kv.get(k) == ref_kv.get(k), f"hf f32: {k} is {str(kv.get(k))[:80]}, model.gguf has {str(ref_kv.get(k))[:80]}")
    check(abs(kv["llama.attention.layer_norm_rms_epsilon"] - ref_kv["llama.attention.layer_norm_rms_epsilon"]) < 1e-12 and
          kv["llama.rope.freq_base"] == ref_kv["llama.rope.freq_base"], "hf f32: eps or rope theta")
rc, _, err = run("quantize", f"{aid}/hf", f"{tmp}/hf-q4_k_m.gguf", "--type", "q4_k_m")
check(rc == 0, f"hf q4_k_m: {err}")
rc, _, err = run("quantize", f"{aid}/model.gguf", f"{tmp}/gguf-q4_k_m.gguf", "--type", "q4_k_m")
check(rc == 0, f"model.gguf q4_k_m: {err}")
if not failures:
    a, b = read_gguf(f"{tmp}/hf-q4_k_m.gguf"), read_gguf(f"{tmp}/gguf-q4_k_m.gguf")
    check({n: t["type"] for n, t in a[2].items()} == {n: t["type"] for n, t in b[2].items()},
          "the folder and model.gguf quantize to different types")
    check(a[2]["token_embd.weight"]["type"] == "q8_0" and a[2]["blk.0.ffn_down.weight"]["type"] == "f16" and
          a[2]["blk.0.attn_q.weight"]["type"] == "q5_0", "aidreams q4_k_m: tied rows of 64: Q8_0, F16 for 172, Q5_0")
    # The tokenizer came through: the same prompt ids and greedy tokens as model.gguf's (GPU: lavapipe).
    gen = [run("generate", f, "--prompt", "I dream of", "-n", "6", "--json") for f in (f"{tmp}/hf-f32.gguf", f"{aid}/model.gguf")]
    check(all(g[0] == 0 for g in gen) and json.loads(gen[0][1])["prompt_tokens"] == json.loads(gen[1][1])["prompt_tokens"]
          and json.loads(gen[0][1])["tokens"] == json.loads(gen[1][1])["tokens"], f"generate: {gen}")
# stories260K's folder has no tokenizer.json: written without one, said on stderr.
rc, _, err = run("quantize", f"{models}/stories260K/hf", f"{tmp}/stories.gguf", "--type", "q8_0")
check(rc == 0 and "no tokenizer" in err and "tokenizer.ggml.model" not in read_gguf(f"{tmp}/stories.gguf")[1],
      f"stories: rc {rc}: {err}")

# A folder whose tokenizer is not SentencePiece-style (byte-level BPE, as Llama 3's): written without one.
os.makedirs(f"{tmp}/bpe")
for f in ("config.json", "model.safetensors"):
    shutil.copy(f"{aid}/hf/{f}", f"{tmp}/bpe/")
with open(f"{tmp}/bpe/tokenizer.json", "w") as f:
    json.dump({"model": {"type": "BPE", "byte_fallback": False, "vocab": {"a": 0, "b": 1}, "merges": []}}, f)
rc, _, err = run("quantize", f"{tmp}/bpe/", f"{tmp}/bpe.gguf", "--type", "q8_0")
check(rc == 0 and "not a SentencePiece-style" in err and "tokenizer.ggml.tokens" not in read_gguf(f"{tmp}/bpe.gguf")[1]
      and read_gguf(f"{tmp}/bpe.gguf")[1]["general.name"] == "bpe", f"byte-level tokenizer: rc {rc}: {err}")

# ---- refusals ----
out = f"{tmp}/refused.gguf"
for bad in ([], [small], [small, out], [small, out, "--type", "q3_k_m"], [small, out, "--type"],
            [small, out, "--type", "q4_0", "--threads", "0"], [small, out, "--type", "q4_0", "--frobnicate"],
            [small, out, "--type", "q4_0", "--output-tensor-type", "q9"]):
    rc, _, err = run("quantize", *bad)
    check(rc == 2 and err, f"{bad}: rc {rc}: {err}")
    no_leftovers(out, f"{bad}")
os.makedirs(f"{tmp}/gpt2")
with open(f"{tmp}/gpt2/config.json", "w") as f:
    json.dump({"architectures": ["GPT2LMHeadModel"], "n_embd": 64}, f)
shutil.copy(f"{aid}/hf/model.safetensors", f"{tmp}/gpt2/")
os.makedirs(f"{tmp}/empty")
q8 = f"{tmp}/small-q8_0.gguf"


def patched(path, edit):
    with open(path, "rb") as f:
        b = bytearray(f.read())
    edit(b)
    with open(f"{path}.patched", "wb") as f:
        f.write(b)
    return f"{path}.patched"


# A NaN in a weight: refused, naming the tensor and row.
_, _, st, _ = read_gguf(small)
nan_file = patched(small, lambda b: b.__setitem__(slice(st["blk.1.attn_q.weight"]["at"] + 4 * 300,
                                                        st["blk.1.attn_q.weight"]["at"] + 4 * 301), struct.pack("<f", math.nan)))
# A GGUF of another architecture.
other = patched(tiny, lambda b: b.__setitem__(slice(b.index(b"llama", 0, 200), b.index(b"llama", 0, 200) + 5), b"gpt2x"))
for args, words in (([f"{tmp}/no-such.gguf", out, "--type", "q4_0"], "no-such"),
                    ([f"{tmp}/gpt2", out, "--type", "q4_0"], "GPT2LMHeadModel"),
                    ([f"{tmp}/empty", out, "--type", "q4_0"], "config.json"),
                    ([other, out, "--type", "q4_0"], "gpt2x"),
                    ([q8, out, "--type", "q4_k_m"], "--allow-requantize"),
                    ([nan_file, out, "--type", "q4_k_m"], "blk.1.attn_q.weight, row 1"),
                    ([tiny, out, "--type", "q4_k_m", "--token-embedding-type", "q4_k"], "not a multiple"),
                    ([small, small, "--type", "q8_0"], "input itself")):
    rc, _, err = run("quantize", *args)
    check(rc == 1 and words in err, f"{args}: rc {rc}: {err}")
    no_leftovers(out, f"{args}")
# An OUT that exists stays as it was when the run fails; --allow-requantize does what it says.
with open(out, "w") as f:
    f.write("keep me")
rc, _, err = run("quantize", nan_file, out, "--type", "q8_0")
check(rc == 1 and open(out).read() == "keep me", f"an existing OUT was touched: rc {rc}")
os.remove(out)
rc, _, err = run("quantize", q8, out, "--type", "q4_k_m", "--allow-requantize")
check(rc == 0 and read_gguf(out)[2]["blk.0.attn_q.weight"]["type"] == "q4_K", f"--allow-requantize: rc {rc}: {err}")

if not failures:
    shutil.rmtree(tmp)
sys.exit(status())
