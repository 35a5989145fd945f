#!/usr/bin/env python3
"""Writes the seed corpus fuzz/corpus/gguf/: small valid GGUF files (every metadata type, nested
arrays, each tensor type nuvec reads and some it refuses, v2 and v3, another alignment, a tiny Llama
layout) and one of each kind of malformed file. Run from the repository root; the outputs are
committed."""
import os, struct

OUT = "fuzz/corpus/gguf"
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
          U64: "<Q", I64: "<q", F64: "<d"}
# ggml type: (block elements, block bytes)
TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 8: (32, 34), 12: (256, 144), 24: (1, 1), 30: (1, 2)}


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STR:
        return s(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def gguf(kvs, tensors, version=3, align=32, pad_end=False):
    """kvs: (key, type, value); tensors: (name, ne innermost first, ggml type), packed in order."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += s(k) + struct.pack("<I", t) + value(t, v)
    data, at = b"", 0
    for name, ne, gt in tensors:
        blk, size = TYPES[gt]
        n = 1
        for d in ne:
            n *= d
        nbytes = n // blk * size
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", gt, at)
        chunk = bytes((i * 7 + 3) & 0xFF for i in range(nbytes))
        data += chunk
        at += nbytes
        if (name, ne, gt) != tensors[-1] or pad_end:
            pad = -at % align
            data += bytes(pad)
            at += pad
    out += bytes(-len(out) % align)
    return out + data


every_type = [("k.u8", U8, 200), ("k.i8", I8, -5), ("k.u16", U16, 65000), ("k.i16", I16, -300),
              ("k.u32", U32, 4000000000), ("k.i32", I32, -70000), ("k.f32", F32, 0.25), ("k.bool", BOOL, True),
              ("k.str", STR, "h\u00e9llo"), ("k.u64", U64, 1 << 40), ("k.i64", I64, -3), ("k.f64", F64, -1.5),
              ("k.arr.u32", ARR, (U32, [7, 8, 9])), ("k.arr.str", ARR, (STR, ["a", "bc", ""])),
              ("k.arr.arr", ARR, (ARR, [(I16, [1, -2]), (I16, [3])])),
              ("k.arr.arr.str", ARR, (ARR, [(STR, ["x"]), (STR, ["y", "zz"])])),
              ("k.arr.bool", ARR, (BOOL, [False, True]))]
vocab = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(4)] + ["\u2581a", "a"]
llama_kvs = [("general.architecture", STR, "llama"), ("llama.block_count", U32, 1),
             ("llama.embedding_length", U32, 32), ("llama.attention.head_count", U32, 2),
             ("llama.attention.head_count_kv", U32, 1), ("llama.rope.freq_base", F32, 10000.0),
             ("tokenizer.ggml.model", STR, "llama"), ("tokenizer.ggml.tokens", ARR, (STR, vocab)),
             ("tokenizer.ggml.scores", ARR, (F32, [0.0] * len(vocab))),
             ("tokenizer.ggml.token_type", ARR, (I32, [2, 3, 3] + [6] * 4 + [1, 1]))]
llama_tensors = [("token_embd.weight", [32, 9], 8), ("blk.0.attn_norm.weight", [32], 0),
                 ("blk.0.attn_q.weight", [32, 32], 2), ("blk.0.attn_k.weight", [32, 16], 1),
                 ("blk.0.ffn_down.weight", [32, 32], 30), ("output_norm.weight", [32], 0)]

seeds = {
    "valid_every_type": gguf(every_type + [("general.alignment", U32, 64)],
                             [("w", [4, 2], 0), ("q", [32, 2], 8), ("r", [32], 3)], align=64),
    "valid_llama": gguf(llama_kvs, llama_tensors),
    "valid_v2_scalar": gguf([("general.name", STR, "s")], [("s", [], 0), ("i", [3], 24)], version=2),
    "valid_refused_types": gguf([], [("k", [256], 12), ("b", [5, 1, 1, 2], 30)], pad_end=True),
    "valid_empty": gguf([], []),
    "bad_v1": b"GGUF" + struct.pack("<IIII", 1, 0, 0, 0),
    "bad_count": b"GGUF" + struct.pack("<IQQ", 3, 1 << 62, 1),
    "bad_string": b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + s("k") + struct.pack("<IQ", STR, 1 << 40),
    "bad_past_end": gguf([], [("a", [16], 0)])[:-1],
    "bad_type": b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + s("t") + struct.pack("<IQIQ", 1, 32, 99, 0) + bytes(104),
}
os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name + ".gguf"), "wb") as f:
        f.write(data)
