# cli_crash.sh — crash consistency: a run killed with SIGKILL at random moments, over and over (some kills aimed at
# its checkpoint writes), and continued each time as the run directory then allows (--resume, or a new run where
# nothing was saved yet), ends with the final and best checkpoints byte for byte those of an uninterrupted run, and
# the same metrics (all but the wall-clock figures).
#
# CI runs SF_CRASH_KILLS=10 kills (well under a minute). A soak run asks for more, e.g.
#   SF_CRASH_KILLS=500 SF_CRASH_EPOCHS=40 bash tests/cli/cli_crash.sh build/spikefuse /usr/bin/python3 /tmp/soak
# SF_CRASH_SEED picks the kill schedule (the script prints the one it used, so a failure can be replayed).
. "$(dirname "$0")/lib.sh"

KILLS=${SF_CRASH_KILLS:-10}
EPOCHS=${SF_CRASH_EPOCHS:-6}
SEED=${SF_CRASH_SEED:-$$}
RANDOM=$SEED
echo "cli_crash: $KILLS kills, $EPOCHS epochs, seed $SEED"

data data --train 256 --test 64
# ~0.4 M parameters with Adam state: 4.9 MB per checkpoint, so a kill can land inside a write; 8 steps per epoch.
cat >crash.ini <<INI
[train]
dataset = fashion-mnist
data_dir = $WORK/data
epochs = $EPOCHS
batch = 32
timesteps = 2
optimizer = adam
lr = 0.001
seed = 11
log_every = 1
[flatten]
[linear]
out = 512
[lif]
[dropout]
p = 0.2
[linear]
out = 10
INI

t0=$(date +%s%N)
sf 0 ref train crash.ini --out ref
ref_ms=$((($(date +%s%N) - t0) / 1000000))

# Kill i: odd ones wait for a checkpoint write to start (its temporary file) and kill at once; even ones kill after
# a random delay within the uninterrupted run's duration (start-up and data loading included).
in_save=0
fresh_starts=0
for i in $(seq 1 "$KILLS"); do
    if [ -s run/last.safetensors ]; then
        "$SF" train --resume run >"kill$i.out" 2>"kill$i.err" &
    else
        fresh_starts=$((fresh_starts + 1))
        "$SF" train crash.ini --out run >"kill$i.out" 2>"kill$i.err" &
    fi
    pid=$!
    if [ $((i % 2)) -eq 1 ]; then
        for _ in $(seq 1 3000); do
            compgen -G "run/*.tmp.*" >/dev/null && break
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.001
        done
    else
        ms=$((RANDOM % (ref_ms + 1)))
        sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
    fi
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    # The next start loads what the kill left (CRC-32s checked), so a damaged checkpoint would fail the run.
    if compgen -G "run/*.tmp.*" >/dev/null; then in_save=$((in_save + 1)); fi
done
echo "cli_crash: $in_save of $KILLS kills landed inside a checkpoint write; $fresh_starts fresh starts"
check "some kills landed inside checkpoint writes ($in_save)" test "$in_save" -ge 1
if [ -s run/last.safetensors ]; then
    sf 0 final train --resume run
else
    sf 0 final train crash.ini --out run
fi

for f in last.safetensors best.safetensors config.ini; do
    check "$f byte for byte the uninterrupted run's" cmp -s ref/$f run/$f
done
check "no temporaries left" test -z "$(ls run | grep '\.tmp\.')"
"$PY" - ref/metrics.jsonl run/metrics.jsonl <<'PYEOF' || bad "metrics.jsonl differs from the uninterrupted run's"
import json, sys
CLOCK = {"samples_per_s", "train_seconds", "data_wait_seconds", "test_seconds", "peak_rss_bytes"}
def lines(path):
    return [{k: v for k, v in json.loads(l).items() if k not in CLOCK} for l in open(path)]
a, b = lines(sys.argv[1]), lines(sys.argv[2])
if a != b:
    for x, y in zip(a, b):
        if x != y:
            print("first difference:", x, y, sep="\n  ")
            break
    print(len(a), "lines against", len(b))
    sys.exit(1)
PYEOF

finish
