#!/usr/bin/env python3
"""Writes the byte-level BPE seeds of fuzz/corpus/llm_tokenizer/ (modes 4 to 7 of
fuzz/fuzz_llm_tokenizer.c; the SentencePiece ones, modes 0 to 3, were written by hand). Run from
the repository root; the outputs are committed."""
import os
import struct

OUT = "fuzz/corpus/llm_tokenizer"
PRE_LLAMA, PRE_TEKKEN, PRE_DEEPSEEK = 1, 12, 4  # indexes into the target's PRES


def gguf(kvs):
    """A GGUF v3 file of metadata only: kvs is (key, type, packed value)."""
    s = lambda b: struct.pack("<Q", len(b)) + b
    out = struct.pack("<4sIQQ", b"GGUF", 3, 0, len(kvs))
    for key, t, raw in kvs:
        out += s(key.encode()) + struct.pack("<I", t) + raw
    return out


def strings(items):
    return struct.pack("<IQ", 8, len(items)) + b"".join(struct.pack("<Q", len(x)) + x for x in items)


def byte_char(b):
    keep = lambda x: 0x21 <= x <= 0x7E or 0xA1 <= x <= 0xAC or 0xAE <= x <= 0xFF
    return chr(b if keep(b) else 256 + sum(1 for k in range(b) if not keep(k))).encode()


text = "Hello, y'all! 123 4567 \u00e9\U0001F999 <|eot_id|><tool>\n\n  x\u3000\u0085".encode() + b" \xff\xc3"
tokens = [byte_char(b) for b in range(256)] + [b"ab", b"\xc4\xa0a", b"<|eot_id|>"]
bpe_gguf = gguf([
    ("tokenizer.ggml.model", 8, struct.pack("<Q", 4) + b"gpt2"),
    ("tokenizer.ggml.pre", 8, struct.pack("<Q", 9) + b"llama-bpe"),
    ("tokenizer.ggml.tokens", 9, strings(tokens)),
    ("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, len(tokens)) + struct.pack(f"<{len(tokens)}i", *([1] * 258 + [3]))),
    ("tokenizer.ggml.merges", 9, strings([b"a b", b"\xc4\xa0 a"])),
    ("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 258)),
])
spm_tokens = [b"<unk>", b"<s>", b"</s>"] + [b"<0x%02X>" % b for b in range(256)] + ["\u2581a".encode(), b"a"]
spm_gguf = gguf([
    ("tokenizer.ggml.model", 8, struct.pack("<Q", 5) + b"llama"),
    ("tokenizer.ggml.tokens", 9, strings(spm_tokens)),
    ("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, len(spm_tokens)) + struct.pack(f"<{len(spm_tokens)}f", *([0.0] * 259 + [1.0, 0.0]))),
    ("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, len(spm_tokens)) + struct.pack(f"<{len(spm_tokens)}i", *([2, 3, 3] + [6] * 256 + [1, 1]))),
    ("tokenizer.ggml.unknown_token_id", 4, struct.pack("<I", 0)),
    ("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 1)),
])
seeds = {
    "bpe_text_llama": bytes([4, PRE_LLAMA]) + text,
    "bpe_text_tekken_special": bytes([4 | 1 << 3, PRE_TEKKEN]) + text,
    "bpe_text_deepseek": bytes([4, PRE_DEEPSEEK]) + text,
    "bpe_vocab": bytes([5 | (1 | 4 << 2) << 3]) + b"ab\n\xc4\xa0a\n<x>\0a b\n\xc4\xa0 a\0" + text,
    "bpe_vocab_bad_merge": bytes([5 | 1 << 3]) + b"ab\0ab\n" + text,
    "gguf_bpe": bytes([6]) + bpe_gguf,
    "gguf_spm": bytes([6]) + spm_gguf,
    "utf8_stream": bytes([7]) + bytes(range(256)) + text,
}
os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
