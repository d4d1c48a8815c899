# cli_atomic.sh — checkpoints are written atomically: a training process killed with SIGKILL at random moments,
# mostly while it saves (tiny epochs, a large checkpoint), always leaves a last.safetensors that loads, and the
# next --resume cleans up the partial temporary file and goes on.
. "$(dirname "$0")/lib.sh"

data data --train 64 --test 32
# ~1.6 M parameters with Adam state: ~19 MB per checkpoint against two training steps per epoch.
cat >big.ini <<'INI'
[train]
dataset = fashion-mnist
epochs = 1000000
batch = 32
timesteps = 1
optimizer = adam
lr = 0.001
log_every = 0
[flatten]
[linear]
out = 2048
[lif]
[linear]
out = 10
INI
"$SF" train big.ini --set train.data_dir="$WORK/data" --out run >first.out 2>first.err &
pid=$!
for _ in $(seq 1 1000); do
    [ -s run/last.safetensors ] && break
    sleep 0.01
done
kill -KILL "$pid"
wait "$pid" 2>/dev/null
check "a first checkpoint was written" test -s run/last.safetensors

hits=0
for i in $(seq 1 12); do
    "$SF" train --resume run >"resume$i.out" 2>"resume$i.err" &
    pid=$!
    sleep "0.$((RANDOM % 5 + 2))"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    # A temporary file left behind means the kill landed inside a save.
    if ls run | grep -q '\.tmp\.'; then hits=$((hits + 1)); fi
    sf 0 "eval$i" eval run/last.safetensors --json
    check "checkpoint $i is a complete safetensors file" "$PY" "$HERE/st_check.py" run/last.safetensors
done
echo "kills inside a save: $hits of 12"
check "at least one kill landed inside a save ($hits)" test "$hits" -ge 1
sf 0 final train --resume run --set train.epochs=$(( $(json_field run/metrics.jsonl epoch epoch | tail -1) + 1 ))
check "the final resume removed the partial temporaries" test -z "$(ls run | grep '\.tmp\.')"

finish
