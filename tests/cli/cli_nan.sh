# cli_nan.sh — a loss or gradient that becomes NaN/Inf stops training with a clear message and exit code 4; the
# last good checkpoint stays loadable and untouched.
. "$(dirname "$0")/lib.sh"

data data
# Inputs scaled by 1e30 (a tiny normalisation std) overflow a linear classifier's logits at the second step.
cat >linear.ini <<'INI'
[train]
dataset = fashion-mnist
epochs = 2
batch = 32
timesteps = 1
optimizer = sgd
lr = 0.001
std = 1e-30
[flatten]
[linear]
out = 10
INI
sf 4 nan_first train linear.ini --set train.data_dir="$WORK/data" --out first
has "the message says what happened" nan_first.err "NaN/Inf at epoch 1, step 2"
has "the message names the initial checkpoint" nan_first.err "the last good checkpoint is first/last.safetensors (epoch 0, step 0)"
has "the stop is logged in metrics.jsonl" first/metrics.jsonl '"type":"stopped"'

# A run with one good epoch whose weights then overflow: the checkpoint of epoch 1 is doctored so that the last
# layer's weights are 3e38 (as if an update had blown them up, its CRC-32 record kept right), and the run goes on
# from it.
sf 0 good train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/data" --set train.epochs=1 --out later
"$PY" "$HERE/st_check.py" --fill later/last.safetensors 4.weight 3e38
sum_before=$(md5sum <later/last.safetensors)
sf 4 nan_later train --resume later --set train.epochs=3
has "the message names the step" nan_later.err "NaN/Inf at epoch 2, step 17"
has "the message names the last good checkpoint" nan_later.err "the last good checkpoint is later/last.safetensors (epoch 1, step 16)"
check "the last checkpoint is untouched" test "$(md5sum <later/last.safetensors)" = "$sum_before"
sf 0 eval_kept eval later/last.safetensors
check "the kept checkpoint is a complete safetensors file" "$PY" "$HERE/st_check.py" later/last.safetensors

finish
