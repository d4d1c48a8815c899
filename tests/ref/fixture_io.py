"""Writes (and reads back) reference fixtures as safetensors files (JSON header + raw little-endian bytes) with only the
standard library, so the generators need nothing beyond Debian's python3-torch; and draws their numbers in float32,
so the C side reads exactly the values the float64 reference used."""
import json
import struct

import torch

_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.uint8: "U8", torch.int32: "I32", torch.int64: "I64"}


def save(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path):
    """The tensors of a safetensors file written by save() or by the C side, by name."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    types = {v: k for k, v in _DTYPES.items()}
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        raw = bytearray(data[8 + n + a:8 + n + b])
        out[name] = torch.frombuffer(raw, dtype=types[e["dtype"]]).reshape(e["shape"]) if raw else \
            torch.zeros(e["shape"], dtype=types[e["dtype"]])
    return out


def f32(v):
    """v rounded to float32, as the C side holds a parameter."""
    return float(torch.tensor(v, dtype=torch.float32))


def randn32(shape, generator=None, mean=0.0, std=1.0):
    """Normal draws rounded to float32 and widened to float64."""
    return (torch.randn(shape, generator=generator) * std + mean).float().double()
