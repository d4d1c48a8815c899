# cli_config_errors.sh — mistakes in a config file or a --set reach the user as "file:line: what is wrong"
# (exit 3), before any data is read or any directory is created.
. "$(dirname "$0")/lib.sh"

cfg() { # cfg NAME LINE...: writes NAME.ini from the remaining arguments, one per line
    local name=$1
    shift
    printf '%s\n' "$@" >"$name.ini"
}

cfg unknown_key "[train]" "dataset = fashion-mnist" "learning_rate = 0.1" "[flatten]" "[linear]" "out = 10"
sf 3 unknown_key train unknown_key.ini
has "unknown key: file:line" unknown_key.err "unknown_key.ini:3"
has "unknown key: names the key" unknown_key.err "learning_rate"

cfg unknown_section "[train]" "dataset = fashion-mnist" "[flatten]" "[dense]" "out = 10"
sf 3 unknown_section train unknown_section.ini
has "unknown section: file:line" unknown_section.err "unknown_section.ini:4"

cfg bad_type "[train]" "dataset = fashion-mnist" "epochs = three" "[flatten]" "[linear]" "out = 10"
sf 3 bad_type train bad_type.ini
has "bad type: file:line" bad_type.err "bad_type.ini:3"

cfg out_of_range "[train]" "dataset = fashion-mnist" "[neuron]" "tau = 0.5" "[flatten]" "[linear]" "out = 10"
sf 3 out_of_range train out_of_range.ini
has "out of range: file:line" out_of_range.err "out_of_range.ini:4"

cfg bad_enum "[train]" "dataset = fashion-mnist" "optimizer = lbfgs" "[flatten]" "[linear]" "out = 10"
sf 3 bad_enum train bad_enum.ini
has "bad choice: file:line" bad_enum.err "bad_enum.ini:3"
has "bad choice: lists the choices" bad_enum.err "adam"

cfg after_readout "[train]" "dataset = fashion-mnist" "[flatten]" "[readout]" "type = leaky" "[linear]" "out = 10"
sf 3 after_readout train after_readout.ini
has "layer after [readout]: file:line" after_readout.err "after_readout.ini:6: [linear] after [readout] (line 4)"

cfg moved_key "[train]" "dataset = fashion-mnist" "loss = ce_per_step" "[flatten]" "[linear]" "out = 10"
sf 3 moved_key train moved_key.ini
has "old [train] key: file:line and where it went" moved_key.err \
    "moved_key.ini:3: unknown key 'loss' in [train]: moved to [readout]"

sf 3 bad_set_readout train "$HERE/tiny_mlp.ini" --set readout.tau=0.5
has "bad --set readout value is named" bad_set_readout.err "readout.tau=0.5: must be in [1"
sf 3 lr_underflow train "$HERE/tiny_mlp.ini" --set train.lr=1e-50 --out lr_underflow
has "a value that is 0 as a float is refused, saying so" lr_underflow.err \
    "train.lr=1e-50: must be in (0, 1000] (1e-50 is stored as the 32-bit float 0)"
check "nothing was written for it" test ! -e lr_underflow

cfg smoothing_range "[train]" "dataset = fashion-mnist" "[flatten]" "[linear]" "out = 10" "[readout]" \
    "label_smoothing = 1.5"
sf 3 smoothing_range train smoothing_range.ini
has "label smoothing out of range: file:line" smoothing_range.err "smoothing_range.ini:7"
cfg smoothing_mse "[train]" "dataset = fashion-mnist" "[flatten]" "[linear]" "out = 10" "[readout]" \
    "loss = mse_rate" "label_smoothing = 0.1"
sf 3 smoothing_mse train smoothing_mse.ini
has "label smoothing with mse_rate: file:line, both keys" smoothing_mse.err \
    "smoothing_mse.ini:6: [readout] label_smoothing = 0.1 applies to the cross-entropy losses, not to loss = mse_rate"

sf 3 bad_set train "$HERE/tiny_mlp.ini" --set train.lr=fast
has "bad --set value is named" bad_set.err "train.lr"
sf 3 bad_set_key train "$HERE/tiny_mlp.ini" --set train.speed=1
has "unknown --set key is named" bad_set_key.err "train.speed"
sf 3 bad_set_form train "$HERE/tiny_mlp.ini" --set lr
check "no run directory was created for failed configs" test ! -e runs

finish
