#!/usr/bin/env python3
"""check_tokenize.py NUVEC MODELS_DIR TMP: `nuvec tokenize` end to end (llama.cpp's vocabulary-only
GGUF files and the tiny models: ids, pieces, --no-bos, --special, --file, --json, refusals), and
`nuvec generate` on a byte-level BPE vocabulary: stories260K's weights with a GGUF vocabulary written
here whose byte tokens are the ids the model produces, so that its text has characters split across
tokens and bytes that are not UTF-8 (streamed and --json output must be valid UTF-8, with U+FFFD),
and an end-of-generation token (<|im_end|>, not the eos) where greedy decoding reaches it."""
import json
import os
import struct
import subprocess
import sys

from checks import check, failures, status

nuvec, models, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
vocab = f"{models}/vocab"


def run(*args, sub="tokenize"):
    p = subprocess.run([nuvec, sub, *args], capture_output=True, timeout=600)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def tokenize_json(*args):
    rc, out, err = run(*args, "--json")
    check(rc == 0, f"tokenize {args}: rc {rc}: {err}")
    return json.loads(out) if rc == 0 else {"tokens": None, "pieces": None}


# ---- nuvec tokenize ----------------------------------------------------------------------------
bpe = f"{vocab}/ggml-vocab-llama-bpe.gguf"
o = tokenize_json(bpe, "--prompt", "Hello world")
check(o["tokens"] == [128000, 9906, 1917] and o["pieces"] == ["<|begin_of_text|>", "Hello", " world"]
      and o["model"] == "gpt2" and o["pre"] == "llama-bpe" and o["count"] == 3, f"llama-bpe: {o}")
check(tokenize_json(bpe, "--prompt", "Hello world", "--no-bos")["tokens"] == [9906, 1917], "--no-bos")
check(tokenize_json(bpe, "--prompt", "a<|eot_id|>", "--no-bos", "--special")["tokens"] == [64, 128009], "--special")
check(128009 not in tokenize_json(bpe, "--prompt", "a<|eot_id|>")["tokens"], "special tokens are text by default")
check(tokenize_json(f"{vocab}/ggml-vocab-qwen2.gguf", "--prompt", "Hi")["tokens"] == [13048], "qwen2 adds no bos")
# The plain form: one line a token, the id and the text, escaped.
rc, out, err = run(bpe, "--prompt", "a\n\u00e9\U0001F999")
lines = out.decode("utf-8").split("\n")
check(rc == 0 and lines[0] == "128000\t<|begin_of_text|>" and lines[1] == "64\ta" and lines[2] == "198\t\\n"
      and "tokens" in err, f"plain output {lines} {err}")
check(any("\\x" in line for line in lines), f"a character split across tokens shows its bytes: {lines}")
# --file: llama.cpp's first test text, and bytes that are not UTF-8 (pieces stay valid JSON text).
with open(f"{vocab}/ggml-vocab-llama-bpe.gguf.inp", "rb") as f:
    first = f.read().split(b"\n__ggml_vocab_test__\n")[0]
with open(f"{vocab}/ggml-vocab-llama-bpe.gguf.out") as f:
    want = [int(x) for x in f.readline().split()]
path = os.path.join(tmp, "tokenize_input.txt")
with open(path, "wb") as f:
    f.write(first)
check(tokenize_json(bpe, "--file", path, "--no-bos")["tokens"] == want, "--file")
with open(path, "wb") as f:
    f.write(b"ok \xff\xfe\xc3")
o = tokenize_json(bpe, "--file", path, "--no-bos")
check(o["tokens"] is not None and "\ufffd" in "".join(o["pieces"]), f"invalid UTF-8 as U+FFFD in --json: {o}")
# The tiny models: the README's ids, from the GGUF file and from the Hugging Face folder.
for m in (f"{models}/aidreams260K/model.gguf", f"{models}/aidreams260K/hf"):
    check(tokenize_json(m, "--prompt", "I dream of")["tokens"] == [1, 303, 281, 269, 435, 447, 275], m)
# Refusals: arguments (2), files (1, with a message).
for bad in ([bpe], [bpe, "--prompt", "a", "--file", path], [bpe, "--frobnicate"], ["--prompt", "x"]):
    rc, out, err = run(*bad)
    check(rc == 2 and err, f"{bad}: rc {rc}")
rc, out, err = run(f"{models}/no_such_model.gguf", "--prompt", "x")
check(rc == 1 and "no_such_model" in err, f"missing model: rc {rc}: {err}")
with open(bpe, "rb") as f:
    data = f.read()
key = b"tokenizer.ggml.pre"
at = data.index(key) + len(key) + 4 + 8  # the key, its type, the string's length
check(data[at:at + 9] == b"llama-bpe", "found tokenizer.ggml.pre")
patched = os.path.join(tmp, "tokenize_unknown_pre.gguf")
with open(patched, "wb") as f:
    f.write(data[:at] + b"llama-xyz" + data[at + 9:])
rc, out, err = run(patched, "--prompt", "x")
check(rc == 1 and "llama-xyz" in err, f"unknown pre: rc {rc}: {err}")
os.remove(patched)
os.remove(path)


# ---- nuvec generate on a byte-level vocabulary ----------------------------------------------------
def gguf_string(s):
    return struct.pack("<Q", len(s)) + s


def read_gguf(path):
    """The file's metadata (key -> (type, raw value bytes)), in order, the tensor infos' bytes and
    count, and the data section (from its aligned start)."""
    with open(path, "rb") as f:
        d = f.read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", d, 0)
    assert magic == b"GGUF" and version == 3
    p = 24
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(t, p):
        if t == 8:
            return p + 8 + struct.unpack_from("<Q", d, p)[0]
        if t == 9:
            et, n = struct.unpack_from("<IQ", d, p)
            p += 12
            for _ in range(n):
                p = skip(et, p)
            return p
        return p + sizes[t]
    kvs = []
    for _ in range(n_kv):
        n = struct.unpack_from("<Q", d, p)[0]
        key = d[p + 8:p + 8 + n].decode()
        t = struct.unpack_from("<I", d, p + 8 + n)[0]
        start = p + 12 + n
        p = skip(t, start)
        kvs.append((key, t, d[start:p]))
    infos = p
    for _ in range(n_tensors):
        n = struct.unpack_from("<Q", d, p)[0]
        p += 8 + n
        rank = struct.unpack_from("<I", d, p)[0]
        p += 4 + 8 * rank + 4 + 8
    data = (p + 31) // 32 * 32
    return kvs, d[infos:p], n_tensors, d[data:]


def write_gguf(path, kvs, infos, n_tensors, data):
    out = bytearray(struct.pack("<4sIQQ", b"GGUF", 3, n_tensors, len(kvs)))
    for key, t, raw in kvs:
        out += gguf_string(key.encode()) + struct.pack("<I", t) + raw
    out += infos
    out += bytes(-len(out) % 32)
    out += data
    with open(path, "wb") as f:
        f.write(out)


def byte_char(b):
    """GPT-2's alphabet, written here on its own."""
    keep = lambda x: 0x21 <= x <= 0x7E or 0xA1 <= x <= 0xAC or 0xAE <= x <= 0xFF
    return chr(b) if keep(b) else chr(256 + sum(1 for k in range(b) if not keep(k)))


stories = f"{models}/stories260K/model.gguf"
rc, out, err = run(stories, "--tokens", "1", "-n", "40", "--json", sub="generate")
check(rc == 0, f"stories: rc {rc}: {err}")
greedy = json.loads(out)["tokens"]
# The ids 256 .. 511 are the byte tokens (byte b at 256 + b: what this model produces most), 0 is
# <|endoftext|> (eos), 1 <|begin_of_text|> (bos), STOP <|im_end|> (an end of generation that is
# not the eos), the others two-letter tokens with their merges.
STOP = 13
assert STOP in greedy and 0 not in greedy[:greedy.index(STOP) + 1]
tokens, types, merges = [None] * 512, [1] * 512, []
for b in range(256):
    tokens[256 + b] = byte_char(b)
tokens[0], tokens[1], tokens[STOP] = "<|endoftext|>", "<|begin_of_text|>", "<|im_end|>"
types[0] = types[1] = types[STOP] = 3
letters = "abcdefghijklmnopqrstuvwxyz"
pairs = iter((x, y) for x in letters for y in letters)
for i in range(512):
    if tokens[i] is None:
        x, y = next(pairs)
        tokens[i] = x + y
        merges.append(f"{x} {y}")
kvs, infos, n_tensors, data = read_gguf(stories)
kvs = [kv for kv in kvs if not kv[0].startswith("tokenizer.")]
strings = lambda items: struct.pack("<IQ", 8, len(items)) + b"".join(gguf_string(s.encode()) for s in items)
kvs += [("tokenizer.ggml.model", 8, gguf_string(b"gpt2")), ("tokenizer.ggml.pre", 8, gguf_string(b"gpt-2")),
        ("tokenizer.ggml.tokens", 9, strings(tokens)),
        ("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, 512) + struct.pack("<512i", *types)),
        ("tokenizer.ggml.merges", 9, strings(merges)),
        ("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 1)), ("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 0))]
model = os.path.join(tmp, "stories_byte_level.gguf")
write_gguf(model, kvs, infos, n_tensors, data)
want = greedy[:greedy.index(STOP) + 1]
for extra in ([], ["--no-graph"]):
    rc, out, err = run(model, "--tokens", "1", "-n", "40", "--json", *extra, sub="generate")
    check(rc == 0, f"byte-level stories {extra}: rc {rc}: {err}")
    if rc != 0:
        continue
    try:
        o = json.loads(out.decode("utf-8"))  # strict: not UTF-8 would raise
    except (UnicodeDecodeError, ValueError) as e:
        check(False, f"--json is not valid UTF-8 JSON: {e}: {out!r}")
        continue
    check(o["tokens"] == want, f"stops at <|im_end|> {extra}: {o['tokens']} (want {want})")
    check("\ufffd" in o["text"] and all(not 0xD800 <= ord(c) <= 0xDFFF for c in o["text"]), f"U+FFFD in text {o['text']!r}")
    rc, out, err = run(model, "--tokens", "1", "-n", "40", *extra, sub="generate")
    try:
        streamed = out.decode("utf-8")
    except UnicodeDecodeError as e:
        check(False, f"streamed text is not valid UTF-8: {e}: {out!r}")
        continue
    check(rc == 0 and streamed == o["text"] + "\n", f"streamed {streamed!r} vs --json {o['text']!r}")
os.remove(model)
print(f"check_tokenize: {len(failures)} failures")
sys.exit(status())
