#!/usr/bin/env python3
"""st_check.py — loads a spikefuse checkpoint the way a PyTorch user would and prints a summary, or compares the
tensors of two checkpoints bitwise.

Usage: st_check.py FILE                 prints "tensors N params P" and the metadata keys; exit 1 if unreadable
       st_check.py --same FILE1 FILE2   exit 0 when both hold the same tensor names and bytes

With the `safetensors` package installed (PyPI) it uses safetensors.torch.load_file itself; otherwise it applies the
same rules that loader enforces (8-byte length, JSON header, dtypes, shapes, contiguous in-bounds offsets) with
torch alone, so the check runs on a machine with only Debian's python3-torch."""
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "U8": torch.uint8, "I32": torch.int32, "I64": torch.int64}


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    try:
        from safetensors.torch import load_file

        return load_file(path), meta
    except ImportError:
        pass
    data = raw[8 + n :]
    tensors, end = {}, 0
    for name, info in sorted(header.items(), key=lambda e: e[1]["data_offsets"][0]):
        begin, stop = info["data_offsets"]
        assert begin == end, f"{name}: offsets not contiguous"
        dt = DTYPES[info["dtype"]]
        count = 1
        for d in info["shape"]:
            count *= d
        assert stop - begin == count * torch.tensor([], dtype=dt).element_size(), f"{name}: size mismatch"
        tensors[name] = torch.frombuffer(bytearray(data[begin:stop]), dtype=dt).reshape(info["shape"])
        end = stop
    assert end == len(data), "trailing bytes"
    return tensors, meta


def main():
    if sys.argv[1] == "--same":
        a, _ = read(sys.argv[2])
        b, _ = read(sys.argv[3])
        same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
        print("same" if same else "different")
        sys.exit(0 if same else 1)
    t, meta = read(sys.argv[1])
    params = sum(v.numel() for k, v in t.items() if k.endswith(".weight") or k.endswith(".bias"))
    print(f"tensors {len(t)} params {params}")
    print("metadata " + " ".join(sorted(meta)))


if __name__ == "__main__":
    main()
