# cli_exit_codes.sh — one rule for the exit codes of every subcommand (spikefuse --help): 0 done, 1 the run failed
# on this machine (files, data, checkpoints, run directory, device), 2 bad command line, 3 the config is wrong (the
# file, a --set, the network it describes, a checkpoint's saved config, a resume that would change the run), 4 a
# NaN/Inf stopped training, 130 interrupted. Each code each subcommand can give is tried here.
. "$(dirname "$0")/lib.sh"

data data
D=(--set train.data_dir="$WORK/data")
CFG=$HERE/tiny_mlp.ini
# Inputs scaled by 1e30 overflow a linear classifier at its second step (as in cli_nan.sh).
printf '%s\n' "[train]" "dataset = fashion-mnist" "epochs = 1" "batch = 32" "timesteps = 1" "optimizer = sgd" \
    "lr = 0.001" "std = 1e-30" "[flatten]" "[linear]" "out = 10" >overflow.ini

sf 0 help --help
has "the rule is documented" help.out "exit codes (the same for every command)"
for cmd in train eval bench info; do
    sf 0 "help_$cmd" "$cmd" --help
    has "$cmd --help states the rule" "help_$cmd.out" "exit codes (one rule for every command"
done

# train
sf 0 train_ok train "$CFG" "${D[@]}" --set train.epochs=1 --out ok
sf 1 train_nodata train "$CFG" --set train.data_dir="$WORK/none" --out t1
sf 1 train_device train "$CFG" "${D[@]}" --device cuda:7 --out t2
has "a missing device is the machine's problem" train_device.err "cpu"
sf 2 train_flag train "$CFG" --fast
sf 3 train_key train "$CFG" --set train.speed=2
sf 3 train_shape train "$CFG" "${D[@]}" --set layer4.out=11 --out t3
has "a network that does not fit the data set names the line" train_shape.err "tiny_mlp.ini:21"
sf 3 train_nofile train no_such.ini
sf 3 train_changed train --resume ok --set train.lr=0.5
cp -r ok badcfg
"$PY" "$HERE/st_check.py" --edit-meta badcfg/last.safetensors config "epochs = 1" "epochs = zero"
sf 3 train_savedcfg train --resume badcfg
has "an invalid saved config names the checkpoint" train_savedcfg.err "badcfg/last.safetensors (its config):"
sf 4 train_nan train overflow.ini "${D[@]}" --out t4
data big --train 4000
"$SF" train "$CFG" --set train.data_dir="$WORK/big" --set train.epochs=50 --out t5 >int.out 2>int.err &
pid=$!
wait_for t5/metrics.jsonl
kill -INT "$pid"
wait "$pid"
rc=$?
check "train: SIGINT exits 130 (got $rc)" test "$rc" -eq 130

# eval
sf 0 eval_ok eval ok
sf 1 eval_missing eval no_such.safetensors
sf 1 eval_device eval ok --device cuda:7
sf 2 eval_flag eval ok --fast
cp ok/last.safetensors shape.safetensors
"$PY" "$HERE/st_check.py" --edit-meta shape.safetensors config "out = 10" "out = 11"
sf 3 eval_shape eval shape.safetensors
has "a saved config whose network does not fit names the checkpoint" eval_shape.err "shape.safetensors (its config):"
sf 3 eval_savedcfg eval badcfg/last.safetensors
has "an invalid saved config names the checkpoint" eval_savedcfg.err "badcfg/last.safetensors (its config):"

# bench
sf 0 bench_ok bench "$CFG" --synthetic --steps 1 --warmup 0
sf 1 bench_nodata bench "$CFG" --set train.data_dir="$WORK/none" --steps 1
sf 1 bench_device bench "$CFG" --synthetic --device cuda:7 --steps 1
sf 2 bench_flag bench "$CFG" --fast
sf 3 bench_key bench "$CFG" --set train.speed=2
sf 3 bench_shape bench "$CFG" --synthetic --set layer4.out=11
sf 4 bench_nan bench overflow.ini "${D[@]}" --steps 3 --warmup 0

# info
sf 0 info info
sf 2 info_extra info --verbose

finish
