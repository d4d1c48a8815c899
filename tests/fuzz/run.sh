#!/bin/sh
# Builds the libFuzzer targets with clang in their own build directory and runs each for SECONDS (default 60)
# from a small seed corpus written here. Exits non-zero when a target crashes; the reproducer is left in
# $FUZZ_DIR/artifacts. Usage: tests/fuzz/run.sh [SECONDS] [BUILD_DIR]
set -eu
seconds=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${2:-$root/build-fuzz}
jobs=$(nproc 2>/dev/null || echo 2)

command -v clang >/dev/null || { echo "fuzz: clang not found (apt-get install clang)" >&2; exit 1; }
CC=clang cmake -S "$root" -B "$build" -DSF_FUZZ=ON -DSF_CUDA=OFF -DSF_TESTS=OFF -DSF_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
if ! cmake --build "$build" -j"$jobs" --target fuzz_idx fuzz_cifar fuzz_safetensors fuzz_config fuzz_nmnist fuzz_gesture fuzz_aedat2 fuzz_shd fuzz_nir fuzz_metrics \
     fuzz_image fuzz_image_seeds \
     >"$build/build.log" 2>&1; then
  tail -40 "$build/build.log" >&2
  exit 1
fi

corpus=$build/corpus
artifacts=$build/artifacts
mkdir -p "$artifacts"
# Seeds: one valid input per reader (and a few near misses), so the fuzzer starts inside each format.
/usr/bin/env python3 - "$corpus" "$root" <<'PY'
import os, struct, sys, json, glob
out, root = sys.argv[1], sys.argv[2]
def put(target, name, data):
    d = os.path.join(out, target); os.makedirs(d, exist_ok=True)
    open(os.path.join(d, name), "wb").write(data if isinstance(data, bytes) else data.encode())
def idx(dims, data):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)
images, labels = idx([3, 2, 2], range(12)), idx([3], [0, 1, 9])
put("idx", "images", images); put("idx", "labels", labels)
put("idx", "pair", struct.pack("<H", len(images)) + images + labels)
put("idx", "4d", idx([2, 3, 2, 2], range(24)))
rec = lambda l: bytes([l]) + bytes((i * 7) & 255 for i in range(3072))
put("cifar", "two", rec(3) + rec(9)); put("cifar", "bad_label", rec(12)); put("cifar", "short", rec(1)[:100])
def st(tensors, meta=None):
    header, blob = {}, b""
    if meta: header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    h = json.dumps(header).encode(); h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blob
put("safetensors", "f32", st([("w", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
                              ("n", "I64", [1], struct.pack("<q", 5))], {"config": "[train]", "epoch": "1"}))
put("safetensors", "mixed", st([("a", "U8", [3], b"abc"), ("b", "F64", [1], struct.pack("<d", 0.5)),
                                ("c", "I32", [0], b"")]))
# with the CRC-32 table spikefuse writes (io/safetensors.h), so the fuzzer reaches its check
import zlib
w, n = struct.pack("<4f", 1, 2, 3, 4), struct.pack("<q", 5)
crc = json.dumps({"w": "%08x" % zlib.crc32(w), "n": "%08x" % zlib.crc32(n)})
put("safetensors", "crc", st([("w", "F32", [2, 2], w), ("n", "I64", [1], n)], {"crc32": crc}))
for path in sorted(glob.glob(os.path.join(root, "examples", "*.ini"))):
    put("config", os.path.basename(path), open(path, "rb").read())
put("config", "residual", "[train]\ndataset = cifar10\nmean = 0.5,0.5,0.5\n[neuron]\ntau = 3\nsurrogate = atan\n"
    "[conv]\nfilters = 8\nsize = 3\npad = 1\n[bn]\n[lif]\n[conv]\nfilters = 8\nsize = 3\npad = 1\n[bn]\n"
    "[add]\nfrom = -3\n[lif]\ngrad_threshold = 0.1\nreset = soft\n[conv]\nfrom = input\nfilters = 4\nsize = 1\n"
    "stride = 2\n[maxpool]\nsize = 2\n[avgpool]\nsize = 2\nstride = 0\n[flatten]\n[dropout]\np = 0.1\n"
    "[linear]\nout = 10\nbias = off\n[readout]\ntype = leaky\ntau = 3\nloss = ce_per_step\n")
put("config", "overrides", "[train]\ndataset = mnist\n[flatten]\n[linear]\nout = 10\n\0train.lr=0.5\n"
    "neuron.surrogate=rect\nlayer1.out=7\ntrain.device=cuda:2\nreadout.type=leaky\nreadout.tau=4\n")
def nm(x, y, p, t):
    return bytes([x, y, (p << 7) | ((t >> 16) & 0x7f), (t >> 8) & 255, t & 255])
put("nmnist", "three", nm(1, 2, 1, 100) + nm(0, 240, 0, 0) + nm(33, 33, 0, 90))
put("nmnist", "back", nm(1, 2, 1, 100) + nm(3, 4, 0, 50)); put("nmnist", "cut", nm(1, 2, 1, 100)[:3])
def packet(kind, size, overflow, events, number=None):
    n = len(events) if number is None else number
    return struct.pack("<hhiiiiii", kind, 0, size, 4, overflow, len(events), n, n) + b"".join(events)
pol = lambda x, y, p, t: struct.pack("<II", (x << 17) | (y << 2) | (p << 1) | 1, t)
aedat = (b"#!AER-DAT3.1\r\n#!END-HEADER\r\n" + packet(1, 8, 0, [pol(i, 2 * i, i & 1, 1000 + 10 * i) for i in range(20)])
         + packet(0, 8, 0, [struct.pack("<II", 0, 1200)]) + packet(1, 8, 1, [pol(5, 5, 0, 7)]))
csv = b"class,startTime_usec,endTime_usec\r\n3,1000,1100\r\n11,1100,1300\r\n"
trials = b"user01_led.aedat\r\nuser02_fluorescent.aedat\n"
put("gesture", "one", struct.pack("<H", len(aedat)) + aedat + csv + trials[:len(csv)])
put("gesture", "plain", struct.pack("<H", len(aedat)) + aedat + b"1,1000,1050\n2,1050,1200\n" + b"a.aedat\nb.aedat\n")
be = lambda a, t: struct.pack(">II", a, t)
put("aedat2", "three", b"#!AER-DAT2.0\r\n# raw AE data\r\n" + be(5 << 8 | 9 << 1 | 1, 100) + be(7 << 8, 150)
    + be(127 << 8 | 127 << 1, 0xfffffff0))
put("aedat2", "cut", b"#!AER-DAT2.0\r\n" + be(1, 2)[:5])
put("shd", "arrays", bytes([3, 3]) + struct.pack("<3d", 0.01, 0.02, 0.5) + struct.pack("<3I", 0, 699, 12))
put("shd", "backwards", bytes([2, 2]) + struct.pack("<2d", 0.5, 0.25) + struct.pack("<2I", 1, 2))
# NIR: programs of fuzz_nir.c's file builder (ops: 0 group, 1 up, 2 numbers, 3 strings) for small graphs.
names = ["node", "nodes", "type", "edges", "version", "metadata", "input", "output", "fc", "lif", "conv", "shape",
         "weight", "bias", "tau", "r", "v_leak", "v_threshold", "v_reset", "stride", "padding", "dilation", "groups",
         "kernel_size", "start_dim", "end_dim", "input_type", "scale", "dt", "x"]
texts = ["NIRGraph", "Input", "Output", "Affine", "Linear", "Conv2d", "AvgPool2d", "Flatten", "LIF", "IF", "LI",
         "Scale", "CubaLIF", "SumPool2d", "same", "valid", "input", "output", "fc", "lif", "conv", "1.0.8", ""]
G = lambda n: [0, names.index(n)]
U = [1, 0]
S = lambda n, t: [3, names.index(n), 128, 0, texts.index(t)]
N = lambda n, kind, dims, vals: [2, names.index(n), kind, len(dims)] + dims + vals
def nir_program(neuron, neuron_fields):
    edges = [3, names.index("edges"), 3, 0] + [texts.index(t) for t in ("input", "fc", "fc", "lif", "lif", "output")]
    p = S("version", "1.0.8") + G("node") + S("type", "NIRGraph") + edges + G("nodes")
    p += G("input") + S("type", "Input") + N("shape", 2, [1], [255]) + U
    p += G("output") + S("type", "Output") + N("shape", 2, [1], [110]) + U
    p += G("lif") + S("type", neuron) + sum((N(f, 1, [10], [v] * 10) for f, v in neuron_fields), []) + U
    return bytes(p + G("fc") + S("type", "Affine") + N("bias", 0, [10], [0] * 10) + N("weight", 0, [10, 255], []))
put("nir", "lif", nir_program("LIF", [("tau", 241), ("r", 1), ("v_leak", 0), ("v_threshold", 1)]))
put("nir", "if", nir_program("IF", [("r", 1), ("v_threshold", 2), ("v_reset", 0)]))
put("nir", "readout", nir_program("LI", [("tau", 242), ("r", 1), ("v_leak", 0)]))
put("nir", "nan_tau", nir_program("LIF", [("tau", 252), ("r", 1), ("v_leak", 0), ("v_threshold", 1)]))
# plot's metrics.jsonl: a run's lines, absurd counts and values, a cut last line
steps = "".join(json.dumps({"type": "step", "epoch": 1 + i // 4, "step": i + 1, "loss": 2.0 / (i + 1),
                            "accuracy": 0.1 * (i % 10), "lr": 0.01, "samples_per_s": 900}) + "\n" for i in range(12))
epochs = "".join(json.dumps({"type": "epoch", "epoch": e, "step": 4 * e, "train_loss": 1.0 / e, "train_accuracy": 0.5,
                             "test_accuracy": 0.4 + 0.1 * e, "firing_rates": [0.1, 0.2 * e], "lr": 0.01,
                             "best": e == 3}) + "\n" for e in (1, 2, 3))
put("metrics", "run", steps + epochs)
put("metrics", "absurd", '{"type":"step","epoch":1e19,"step":1e19,"loss":1e300,"lr":-1e-320}\n'
    '{"type":"epoch","epoch":1e19,"step":-3,"test_accuracy":1e308,"firing_rates":[1e19,null,"x"]}\n'
    '{"type":"stopped","step":5}\n{"type":"epoch","epoch":2')
PY

# the image target's seeds are written with libjpeg-turbo and libpng themselves
"$build/tests/fuzz/fuzz_image_seeds" "$corpus/image"

status=0
for t in idx cifar safetensors config nmnist gesture aedat2 shd nir image metrics; do
  mkdir -p "$corpus/$t.run"
  echo "fuzz_$t: ${seconds}s"
  if ! "$build/tests/fuzz/fuzz_$t" "$corpus/$t.run" "$corpus/$t" -max_total_time="$seconds" -max_len=16384 -timeout=10 \
       -rss_limit_mb=4096 -artifact_prefix="$artifacts/$t-" -print_final_stats=1 2>"$build/fuzz_$t.log"; then
    echo "fuzz_$t: CRASH (see $build/fuzz_$t.log and $artifacts)" >&2
    tail -40 "$build/fuzz_$t.log" >&2
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/fuzz_$t.log" | sed "s/^/  /"
  grep -E "^#[0-9]+ +DONE" "$build/fuzz_$t.log" | tail -1 | sed "s/^/  /"
done
exit $status
