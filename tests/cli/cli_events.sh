# cli_events.sh — an event dataset end to end: N-MNIST files written here (each class's events in its own band of
# the sensor, one empty file) trained with `spikefuse train` (binning, augmentation, the frame cache), the empty
# sample's count printed, the cache reused by a second run, eval, and `bench --data`.
. "$(dirname "$0")/lib.sh"

"$PY" - "$WORK/nm" <<'PY'
import os, struct, sys
root = sys.argv[1]
def event(x, y, p, t):
    return bytes([x, y, (p << 7) | ((t >> 16) & 0x7f), (t >> 8) & 255, t & 255])
for split, per in (("Train", 24), ("Test", 6)):
    for d in range(10):
        os.makedirs(f"{root}/{split}/{d}", exist_ok=True)
        for k in range(per):
            evs = b"".join(event((3 * d + i % 3) % 34, (7 * i + k) % 34, i & 1, 100 * i) for i in range(60))
            open(f"{root}/{split}/{d}/{k:05d}.bin", "wb").write(evs)
open(f"{root}/Train/0/99999.bin", "wb").close()
PY
cat >events.ini <<INI
[train]
dataset = nmnist
data_dir = $WORK/nm
data_cache = $WORK/cache
epochs = 3
batch = 20
timesteps = 4
downsample = 2
aug_shift = 1
optimizer = adam
lr = 0.01
seed = 1
# run1 and run3 are compared bitwise: a measured crossover (sparse = auto) may differ between the two processes
sparse_crossover = 0.25
[flatten]
[linear]
out = 64
[lif]
[linear]
out = 10
INI
sf 0 train train events.ini --out run1
has "the empty file is reported" train.err "skipped 1 empty samples"
best=$(json_field run1/metrics.jsonl epoch test_accuracy | sort -g | tail -1)
check "the net learns the classes' sensor bands (best test accuracy $best >= 0.8)" \
    "$PY" -c "import sys; sys.exit(0 if $best >= 0.8 else 1)"
check "the unaugmented test split is cached, the augmented training split is not" \
    test "$(ls cache | grep -c '^nmnist-test-.*\.frames$')" -eq 1 -a "$(ls cache | grep -c train)" -eq 0
before=$(stat -c %Y cache/nmnist-test-*.frames)
sf 0 eval eval run1/best.safetensors --json
check "eval reads the cached test split and reproduces the best accuracy" "$PY" -c "
import json, sys; o = json.load(open('eval.out')); sys.exit(0 if repr(o['test_accuracy']) == '$best' else 1)"
check "the cache file was not rewritten" test "$(stat -c %Y cache/nmnist-test-*.frames)" = "$before"
sf 0 bench bench events.ini --steps 2 --warmup 1 --data
has "bench --data prints the loader's rate" bench.out "data loader:"
sf 1 nodata train events.ini --set train.data_dir="$WORK/nowhere" --out run2
has "missing N-MNIST names the folder looked for" nodata.err "$WORK/nowhere/Train/0"
has "... and the zip" nodata.err "$WORK/nowhere/Train.zip"

# The zips as distributed (entries Train/<digit>/<name>.bin), read through libzip: the same run, the same numbers.
"$PY" - "$WORK/nm" "$WORK/zipped" <<'PY'
import os, sys, zipfile
src, dst = sys.argv[1:3]
os.makedirs(dst, exist_ok=True)
for part in ("Train", "Test"):
    with zipfile.ZipFile(f"{dst}/{part}.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for d in range(10):
            z.writestr(f"{part}/{d}/", b"")
            for name in sorted(os.listdir(f"{src}/{part}/{d}"), reverse=True):
                z.write(f"{src}/{part}/{d}/{name}", f"{part}/{d}/{name}")
PY
sf 0 zipped train events.ini --set train.data_dir="$WORK/zipped" --set train.data_cache= --out run3
check "training from the zips gives the same metrics as from the folders" test \
    "$(json_field run3/metrics.jsonl epoch test_accuracy)" = "$(json_field run1/metrics.jsonl epoch test_accuracy)" -a \
    "$(json_field run3/metrics.jsonl epoch train_loss)" = "$(json_field run1/metrics.jsonl epoch train_loss)"
head -c 4000 zipped/Test.zip >cut.zip && mkdir -p cut && mv cut.zip cut/Test.zip && cp zipped/Train.zip cut/
sf 1 cutzip train events.ini --set train.data_dir="$WORK/cut" --set train.data_cache= --out run4
has "a truncated zip is refused naming it" cutzip.err "cut/Test.zip"
cp zipped/Test.zip cut/Test.zip
"$PY" -c "
import zipfile
e = zipfile.ZipFile('cut/Train.zip').infolist()[2]  # a sample file: flip a byte in its compressed data
at = e.header_offset + 30 + len(e.filename) + len(e.extra) + e.compress_size // 2
b = bytearray(open('cut/Train.zip', 'rb').read()); b[at] ^= 0x55; open('cut/Train.zip', 'wb').write(b)"
sf 1 badzip train events.ini --set train.data_dir="$WORK/cut" --set train.data_cache= --out run5
has "a damaged zip entry is refused naming the zip" badzip.err "cut/Train.zip:Train/"

# A cache folder that cannot be written (here: below a file, so even root cannot) costs the cache, not the run.
touch blocker
sf 0 nocache train events.ini --set train.data_cache="$WORK/blocker/cache" --set train.epochs=1 --out run6
has "training goes on without the cache, with a warning" nocache.err "warning: the frame cache in $WORK/blocker/cache cannot be written"
check "... and the run trains" test -s run6/best.safetensors

# A data set without samples is a data problem (exit 1), named as such.
"$PY" - "$WORK/silent" <<'PY'
import os, sys
for split in ("Train", "Test"):
    for d in range(10):
        os.makedirs(f"{sys.argv[1]}/{split}/{d}", exist_ok=True)
        open(f"{sys.argv[1]}/{split}/{d}/00000.bin", "wb").close()
PY
sf 1 nosamples train events.ini --set train.data_dir="$WORK/silent" --set train.data_cache= --out run7
has "an empty split says so" nosamples.err "the training split of N-MNIST in $WORK/silent holds no samples: every one is empty"
finish
