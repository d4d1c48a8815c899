#!/usr/bin/env python3
"""make_idx.py — writes a tiny, learnable Fashion-MNIST-shaped data set as IDX files for the CLI tests.

Usage: make_idx.py DIR [--train N] [--test N] [--gzip] [--corrupt KIND]

Class c (0..9) is a bright 7x7 square at cell c of a 4x3 grid over noise, so a small network learns it within
one or two epochs. --corrupt writes one broken file instead of a good one:
  magic      the training images start with a wrong magic number
  truncated  the training images file ends early
  count      the training labels hold one label fewer than there are images
  label      a training label is 10 (out of range)
  dims       the training images claim 2^31 rows (a size that must never be allocated)
Only the Python standard library is used."""
import argparse
import gzip
import os
import random
import struct


def images_and_labels(n, rng):
    labels = [i % 10 for i in range(n)]
    rng.shuffle(labels)
    pixels = bytearray()
    for c in labels:
        img = [rng.randrange(0, 60) for _ in range(28 * 28)]
        r0, c0 = (c // 4) * 9 + 1, (c % 4) * 7
        for r in range(r0, r0 + 7):
            for col in range(c0, c0 + 7):
                img[r * 28 + col] = rng.randrange(180, 256)
        pixels.extend(img)
    return pixels, bytes(labels)


def idx(dims, payload, magic=0x00000800):
    header = struct.pack(">I", magic | len(dims)) + b"".join(struct.pack(">I", d) for d in dims)
    return header + payload


def write(path, data, gz):
    if gz:
        with gzip.open(path + ".gz", "wb") as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--train", type=int, default=512)
    ap.add_argument("--test", type=int, default=200)
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--corrupt", choices=["magic", "truncated", "count", "label", "dims"])
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    rng = random.Random(1234)
    for split, n in (("train", a.train), ("t10k", a.test)):
        pixels, labels = images_and_labels(n, rng)
        img = idx([n, 28, 28], bytes(pixels))
        lab = idx([n], labels)
        if split == "train" and a.corrupt:
            if a.corrupt == "magic":
                img = b"\x12\x34" + img[2:]
            elif a.corrupt == "truncated":
                img = img[: len(img) // 2]
            elif a.corrupt == "count":
                lab = idx([n - 1], labels[:-1])
            elif a.corrupt == "label":
                lab = lab[:-1] + b"\x0a"
            elif a.corrupt == "dims":
                img = idx([1 << 31, 28, 28], bytes(pixels))
        write(os.path.join(a.dir, split + "-images-idx3-ubyte"), img, a.gzip)
        write(os.path.join(a.dir, split + "-labels-idx1-ubyte"), lab, a.gzip)


if __name__ == "__main__":
    main()
