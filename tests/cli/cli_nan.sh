# cli_nan.sh — a loss or gradient that becomes NaN/Inf stops training with a clear message and exit code 4; the
# last good checkpoint stays loadable and untouched.
. "$(dirname "$0")/lib.sh"

data data
# A huge learning rate from the first step: nothing good to keep.
sf 4 nan_first train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/data" --set train.optimizer=sgd \
    --set train.lr=1000 --out first
has "the message says what happened" nan_first.err "NaN/Inf"
has "the message says no checkpoint exists" nan_first.err "no checkpoint had been written yet"
has "the stop is logged in metrics.jsonl" first/metrics.jsonl '"type":"stopped"'

# Good epochs first, then a step schedule multiplies the learning rate until it blows up.
sf 4 nan_later train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/data" --set train.optimizer=sgd \
    --set train.lr=0.05 --set train.schedule=step --set train.step_size=1 --set train.gamma=10 \
    --set train.epochs=50 --out later
has "the message names the last good checkpoint" nan_later.err "the last good checkpoint is later/last.safetensors"
sf 0 eval_kept eval later/last.safetensors
check "the kept checkpoint is a complete safetensors file" "$PY" "$HERE/st_check.py" later/last.safetensors

finish
