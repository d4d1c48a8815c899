# cli_corrupt.sh — broken inputs give an error that names the problem (exit 1), never a crash: corrupt IDX files
# (bad magic, truncated, disagreeing counts, labels out of range, absurd sizes), damaged checkpoints (cut, random,
# flipped bits, NaN weights, tensors of another shape), and directories where files should be.
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
# A checkpoint whose tensors do not fit the network its config describes: the error names the file.
cp run/last.safetensors mismatch.safetensors
"$PY" "$HERE/st_check.py" --edit-meta mismatch.safetensors config "out = 32" "out = 33"
sf 1 ck_mismatch eval mismatch.safetensors --data "$WORK/good"
has "mismatch names the tensor" ck_mismatch.err "shape"
has "mismatch names the file" ck_mismatch.err "mismatch.safetensors: tensor"
# A flipped bit in a weight, and a NaN weight (its CRC-32 record kept right): refused, naming the tensor.
cp run/last.safetensors flipped.safetensors
"$PY" "$HERE/st_check.py" --flip flipped.safetensors 1.weight
sf 1 ck_flipped eval flipped.safetensors --data "$WORK/good"
has "a flipped bit names the tensor" ck_flipped.err "tensor '1.weight' is damaged"
cp run/last.safetensors nan.safetensors
"$PY" "$HERE/st_check.py" --fill nan.safetensors 4.bias nan
sf 1 ck_nan eval nan.safetensors --data "$WORK/good"
has "a NaN weight names the tensor" ck_nan.err "tensor '4.bias' holds nan"
# A directory where a checkpoint or a config should be.
mkdir -p dir.ini run_dir/last.safetensors run_dir/best.safetensors
sf 1 ck_dir eval run_dir
has "a directory is named as one" ck_dir.err "run_dir/best.safetensors is a directory, not a file"
sf 3 cfg_dir train dir.ini
has "a directory as config is named as one" cfg_dir.err "dir.ini is a directory, not a file"
sf 1 resume_dir train --resume run_dir
has "a directory as checkpoint is named as one" resume_dir.err "run_dir/last.safetensors is a directory, not a file"
# Files that cannot be opened say why.
sf 1 eval_nofile eval no_such.safetensors
has "a missing checkpoint says why" eval_nofile.err "no_such.safetensors: No such file or directory"
sf 3 train_nofile train no_such.ini
has "a missing config says why" train_nofile.err "no_such.ini: No such file or directory"
sf 1 resume_missing train --resume "$WORK/no_such_run"
has "resume of a missing run names the file" resume_missing.err "no_such_run/last.safetensors"

finish
