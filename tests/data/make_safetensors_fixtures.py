#!/usr/bin/env python3
"""Regenerates the .safetensors fixtures read by tests/core/safetensors_test.cpp.

The `safetensors` package is not a dependency, so the files are built by hand following the spec
(https://github.com/huggingface/safetensors): 8-byte little-endian header length N, N bytes of
JSON (padded with spaces to 8-byte alignment, as the reference writer does), then the data.
Values are arange-based so the test computes them; keep the two in sync. Needs NumPy.
"""
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def bf16_bytes(values):
    # bfloat16 is the top 16 bits of a float32; the values used are exact in bfloat16
    bits = np.asarray(values, dtype="<f4").view("<u4") >> 16
    return bits.astype("<u2").tobytes()


def write(name, tensors, metadata):
    """tensors: list of (name, dtype, shape, raw little-endian bytes), laid out in this order."""
    header = {"__metadata__": metadata}
    data = b""
    for tname, dtype, shape, raw in tensors:
        header[tname] = {"dtype": dtype, "shape": list(shape),
                         "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


# A 3-2-1 MLP as torch.nn.Sequential(Linear(3, 2), ReLU(), Linear(2, 1)) names it.
# value of element i of each tensor: (i + 1) * 0.25 * (layer + 1), sign alternating for weights.
def mlp_values(layer, n, weight):
    v = (np.arange(n) + 1) * 0.25 * (layer + 1)
    if weight:
        v = v * np.where(np.arange(n) % 2 == 0, 1, -1)
    return v.astype("<f4")

write("mlp_3_2_1.safetensors", [
    ("0.weight", "F32", (2, 3), mlp_values(0, 6, True).tobytes()),
    ("0.bias", "F32", (2,), mlp_values(0, 2, False).tobytes()),
    ("2.weight", "F32", (1, 2), mlp_values(1, 2, True).tobytes()),
    ("2.bias", "F32", (1,), mlp_values(1, 1, False).tobytes()),
], {"format": "pt", "note": "hand-built"})

# One tensor per dtype minitrain reads; value i - 1.5 (exact in every type).
vals = np.arange(4) - 1.5
write("dtypes.safetensors", [
    ("f64", "F64", (4,), vals.astype("<f8").tobytes()),
    ("f32", "F32", (2, 2), vals.astype("<f4").tobytes()),
    ("f16", "F16", (4,), vals.astype("<f2").tobytes()),
    ("bf16", "BF16", (2, 2), bf16_bytes(vals)),
], {"format": "pt"})
