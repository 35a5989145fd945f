#!/usr/bin/env python3
"""Writes the seed corpus fuzz/corpus/safetensors/: small valid files and one of each kind of
malformed header. Run from the repository root; the outputs are committed."""
import json, os, struct

OUT = "fuzz/corpus/safetensors"
SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
         "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def raw(header: bytes, data: bytes = b"", length=None) -> bytes:
    return struct.pack("<Q", len(header) if length is None else length) + header + data


def valid(tensors, metadata=None, pad=True) -> bytes:
    """tensors: (name, dtype, shape) in file order; data bytes count up from 0."""
    h, at = {}, 0
    if metadata is not None:
        h["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        h[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + n]}
        at += n
    text = json.dumps(h, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return raw(text, bytes(i & 0xFF for i in range(at)))


seeds = {
    "valid_metadata": valid([("w", "F32", [2, 2]), ("b", "I16", [3])], {"format": "pt", "k": "v"}),
    "valid_every_dtype": valid([(f"t.{d}", d, [2]) for d in SIZES]),
    "valid_empty": valid([], pad=False),
    "valid_scalar_and_zero_size": valid([("s", "F64", []), ("z", "U8", [0, 4]), ("", "BF16", [1])]),
    "valid_rank8": valid([("r8", "U8", [1, 2, 1, 2, 1, 1, 1, 2])], {}),
    "bad_overlap": raw(b'{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},'
                       b'"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}', bytes(6)),
    "bad_gap": raw(b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}', bytes(4)),
    "bad_duplicate": raw(b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
                         b'"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}', bytes(4)),
    "bad_shape": raw(b'{"a":{"dtype":"F16","shape":[-1.5,1e400],"data_offsets":[0,2]}}', bytes(2)),
    "bad_truncated_json": raw(b'{"a":{"dtype":"F32","shape":[1],"data_off', b""),
    "bad_header_length": raw(b'{}', b"", length=0xFFFFFFFFFFFFFFFF),
    "bad_metadata": raw(b'{"__metadata__":{"k":1,"k":"x"},"__metadata__":[]}'),
}
os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
        f.write(data)
