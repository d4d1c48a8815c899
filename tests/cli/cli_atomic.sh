# cli_atomic.sh — checkpoints are written atomically: a training process killed with SIGKILL while it saves (and at
# random moments) always leaves a last.safetensors that loads, and the next --resume removes the partial temporary
# file and goes on.
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
wait_for run/last.safetensors
kill -KILL "$pid"
wait "$pid" 2>/dev/null
check "a first checkpoint was written" test -s run/last.safetensors

# Targeted kills: wait until a save has created its temporary file, then SIGKILL at once; and a few kills at
# random moments.
hits=0
for i in $(seq 1 12); do
    "$SF" train --resume run >"resume$i.out" 2>"resume$i.err" &
    pid=$!
    if [ "$i" -le 8 ]; then
        for _ in $(seq 1 2000); do
            compgen -G "run/*.tmp.*" >/dev/null && break
            sleep 0.005
        done
    else
        sleep "0.$((RANDOM % 5 + 2))"
    fi
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    # A temporary file left behind means the kill landed inside a save.
    if compgen -G "run/*.tmp.*" >/dev/null; then hits=$((hits + 1)); fi
    sf 0 "eval$i" eval run/last.safetensors --json
done
check "the surviving checkpoint is a complete safetensors file" "$PY" "$HERE/st_check.py" run/last.safetensors
echo "kills inside a save: $hits of 12"
check "the targeted kills landed inside saves ($hits >= 8)" test "$hits" -ge 8
sf 0 final train --resume run --set train.epochs=$(( $(json_field run/metrics.jsonl epoch epoch | tail -1) + 1 ))
check "the final resume removed the partial temporaries" test -z "$(ls run | grep '\.tmp\.')"

finish
