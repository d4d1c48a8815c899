#!/usr/bin/env python3
"""st_check.py — loads a spikefuse checkpoint the way a PyTorch user would and prints a summary, or compares the
tensors of two checkpoints bitwise.

Usage: st_check.py FILE                 prints "tensors N params P" and the metadata keys; exit 1 if unreadable
       st_check.py --same FILE1 FILE2   exit 0 when both hold the same tensor names and bytes
       st_check.py --fill FILE NAME V   sets every element of float32 tensor NAME to V, keeping the file's CRC-32
                                        record right (a checkpoint whose training went wrong, not a damaged file)
       st_check.py --flip FILE NAME     flips one bit of tensor NAME in place (damage the CRC-32 must catch)
       st_check.py --edit-meta FILE KEY OLD NEW
                                        replaces the text OLD by NEW in __metadata__ value KEY (e.g. the config)

With the `safetensors` package installed (PyPI) it uses safetensors.torch.load_file itself; otherwise it applies the
same rules that loader enforces (8-byte length, JSON header, dtypes, shapes, contiguous in-bounds offsets) with
torch alone, so the check runs on a machine with only Debian's python3-torch."""
import json
import struct
import sys
import zlib


def read(path):
    import torch  # here, not above: the editing commands need only the standard library (and start faster)

    DTYPES = {"F32": torch.float32, "F64": torch.float64, "U8": torch.uint8, "I32": torch.int32, "I64": torch.int64}
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


def edit(path, name, change):
    """Applies change(bytearray) to tensor NAME's bytes; returns the header, the data offset and the whole file."""
    raw = bytearray(open(path, "rb").read())
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    begin, end = header[name]["data_offsets"]
    data = bytearray(raw[8 + n + begin : 8 + n + end])
    change(data)
    raw[8 + n + begin : 8 + n + end] = data
    return header, n, raw, data


def write_header(path, header, n, raw):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + raw[8 + n :])


def edit_meta(path, key, old, new):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    value = header["__metadata__"][key]
    assert old in value, f"'{old}' not in __metadata__ {key}"
    header["__metadata__"][key] = value.replace(old, new)
    write_header(path, header, n, raw)


def fill(path, name, value):
    def set_all(data):
        data[:] = struct.pack("<f", value) * (len(data) // 4)

    header, n, raw, data = edit(path, name, set_all)
    crcs = json.loads(header["__metadata__"]["crc32"])
    crcs[name] = "%08x" % zlib.crc32(data)
    header["__metadata__"]["crc32"] = json.dumps(crcs, separators=(",", ":"))
    write_header(path, header, n, raw)


def flip(path, name):
    def flip_bit(data):
        data[len(data) // 2] ^= 0x04

    _, _, raw, _ = edit(path, name, flip_bit)
    with open(path, "wb") as f:
        f.write(raw)


def main():
    if sys.argv[1] == "--fill":
        fill(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        return
    if sys.argv[1] == "--flip":
        flip(sys.argv[2], sys.argv[3])
        return
    if sys.argv[1] == "--edit-meta":
        edit_meta(*sys.argv[2:6])
        return
    import torch
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
