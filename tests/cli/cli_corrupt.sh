# cli_corrupt.sh — broken inputs give an error that names the problem (exit 1), never a crash: corrupt IDX files
# (bad magic, truncated, disagreeing counts, labels out of range, absurd sizes) and damaged checkpoints.
. "$(dirname "$0")/lib.sh"

for kind in magic truncated count label dims; do
    data "bad_$kind" --corrupt "$kind"
    sf 1 "idx_$kind" train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/bad_$kind" --out "run_$kind"
    has "corrupt IDX ($kind) names the file" "idx_$kind.err" "train-"
done
data gz --gzip
head -c 5000 gz/train-images-idx3-ubyte.gz >cut.gz && mv cut.gz gz/train-images-idx3-ubyte.gz
sf 1 idx_gz_truncated train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/gz" --out run_gz
sf 1 idx_missing train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/empty" --out run_missing
has "missing data set names where it looked" idx_missing.err "$WORK/empty"

# Damaged checkpoints.
data good
sf 0 train train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/good" --set train.epochs=1 --out run
size=$(stat -c %s run/last.safetensors)
for cut in 0 7 8 100 $((size / 2)) $((size - 1)); do
    head -c "$cut" run/last.safetensors >cut.safetensors
    sf 1 "ck_cut_$cut" eval cut.safetensors
done
head -c 4096 /dev/urandom >random.safetensors
sf 1 ck_random eval random.safetensors
printf 'spikefuse' >text.safetensors
sf 1 ck_text eval text.safetensors
# A header that claims far more data than the file holds.
"$PY" - <<'PYEOF'
import json, struct
h = json.dumps({"w": {"dtype": "F32", "shape": [1 << 40], "data_offsets": [0, 4 << 40]}}).encode()
open("huge.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"\0" * 16)
PYEOF
sf 1 ck_huge eval huge.safetensors
# A checkpoint whose tensors do not fit the network its config describes.
"$PY" - "$WORK/run/last.safetensors" <<'PYEOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
h["__metadata__"]["config"] = h["__metadata__"]["config"].replace("out = 32", "out = 33")
b = json.dumps(h).encode()
open("mismatch.safetensors", "wb").write(struct.pack("<Q", len(b)) + b + raw[8 + n:])
PYEOF
sf 1 ck_mismatch eval mismatch.safetensors --data "$WORK/good"
has "mismatch names the tensor" ck_mismatch.err "shape"
sf 1 resume_missing train --resume "$WORK/no_such_run"
has "resume of a missing run names the file" resume_missing.err "no_such_run/last.safetensors"

finish
