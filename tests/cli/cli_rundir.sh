# cli_rundir.sh — run directories at their edges: a run stopped before its first checkpoint (Ctrl-C at once, a
# directory a killed run left, a NaN in the first steps) is never a dead end; one process at a time writes a run
# directory and a second one names the holder; best.safetensors never disagrees with last.safetensors for good.
. "$(dirname "$0")/lib.sh"

data data
data big --train 4000
D=(--set train.data_dir="$WORK/data")
CFG=$HERE/tiny_mlp.ini
sf 0 ref train "$CFG" "${D[@]}" --out ref
json_field ref/metrics.jsonl step loss >ref.loss

# ---- before the first checkpoint
# A directory as a run killed during its first checkpoint leaves it: the lock file and a temporary.
mkdir -p killed
echo 4242 >killed/train.lock
head -c 100 ref/last.safetensors >killed/last.safetensors.tmp.Qx81zA
sf 1 killed_resume train --resume killed
has "resume says why it cannot and what works" killed_resume.err \
    "killed holds no checkpoint (its run stopped before writing the first one); start it anew with: spikefuse train CONFIG --out killed"
sf 0 killed_new train "$CFG" "${D[@]}" --out killed
json_field killed/metrics.jsonl step loss >killed.loss
check "the new run in it is the uninterrupted one" cmp -s ref.loss killed.loss
check "the killed run's temporary is gone" test -z "$(ls killed | grep tmp)"

# Ctrl-C as soon as the run starts: whatever the run says to do works, and ends as the uninterrupted run. (The
# larger data set keeps the run going well past the moment its directory appears.)
BIG=(--set train.data_dir="$WORK/big" --set train.epochs=1)
sf 0 bigref train "$CFG" "${BIG[@]}" --out bigref
json_field bigref/metrics.jsonl step loss >bigref.loss
"$SF" train "$CFG" "${BIG[@]}" --out early >early1.out 2>early1.err &
pid=$!
for _ in $(seq 1 2000); do
    [ -e early ] && break
    sleep 0.001
done
kill -INT "$pid"
wait "$pid"
rc=$?
check "Ctrl-C at the start exits 130 (got $rc)" test "$rc" -eq 130
if grep -qF -- "--resume early" early1.err; then
    sf 0 early2 train --resume early
else # stopped before it wrote anything: the directory is free for the run
    sf 0 early2 train "$CFG" "${BIG[@]}" --out early
fi
json_field early/metrics.jsonl step loss >early.loss
check "Ctrl-C at the start, then as advised: the uninterrupted run" cmp -s bigref.loss early.loss

# A NaN in the first steps: the initial state is the last good checkpoint, and it loads.
printf '%s\n' "[train]" "dataset = fashion-mnist" "epochs = 1" "batch = 32" "timesteps = 1" "optimizer = sgd" \
    "lr = 0.001" "std = 1e-30" "[flatten]" "[linear]" "out = 10" >overflow.ini
sf 4 nan train overflow.ini "${D[@]}" --out nan
has "the NaN message names the initial checkpoint" nan.err "the last good checkpoint is nan/last.safetensors (epoch 0, step 0)"
sf 0 nan_eval eval nan/last.safetensors --data "$WORK/data"
sf 1 nan_eval_dir eval nan
has "eval of a run without a best names what exists" nan_eval_dir.err "evaluate nan/last.safetensors"
sf 4 nan_again train --resume nan
has "the resumed run stops at the same step" nan_again.err "NaN/Inf at epoch 1, step 2"

# ---- one writer at a time
"$SF" train "$CFG" --set train.data_dir="$WORK/big" --set train.epochs=1000 --out busy >busy.out 2>busy.err &
busy=$!
wait_for busy/metrics.jsonl
sf 1 busy_resume train --resume busy
has "a second resume names the holder" busy_resume.err "busy is in use by another spikefuse train: busy/train.lock is locked by process $busy"
sf 1 busy_out train "$CFG" "${D[@]}" --out busy
has "a second run into it names the holder" busy_out.err "locked by process $busy"
sf 1 busy_fork train --resume busy --out ./busy/
has "the same directory spelled another way is the same" busy_fork.err "locked by process $busy"
kill -INT "$busy"
wait "$busy"
check "the holder was not disturbed: it stops on Ctrl-C as usual" test $? -eq 130
sf 0 busy_after train --resume busy --set train.epochs=1
sf 0 busy_free eval busy --data "$WORK/big"

# Two runs started into one new directory at once: exactly one runs, the other is refused.
"$SF" train "$CFG" "${D[@]}" --out twin >twin1.out 2>twin1.err &
p1=$!
"$SF" train "$CFG" "${D[@]}" --out twin >twin2.out 2>twin2.err &
p2=$!
wait "$p1"
r1=$?
wait "$p2"
r2=$?
check "one twin succeeds, one is refused (exit codes $r1 $r2)" test "$((r1 + r2))" -eq 1
check "the refusal says why" grep -qE "locked by process|holds a run" twin1.err twin2.err
json_field twin/metrics.jsonl step loss >twin.loss
check "the metrics are one run's, not two interleaved" cmp -s ref.loss twin.loss

# ---- best.safetensors and last.safetensors
# A slower learning rate makes epoch 2 better than epoch 1 (90% and 100% on this data) and epoch 3 no better.
S=("${D[@]}" --set train.lr=0.0005)
sf 0 slow train "$CFG" "${S[@]}" --out slow
check "epoch 2 is the best of the reference run" test "$(json_field slow/metrics.jsonl epoch best | tr '\n' ' ')" = "True True "
# An interruption between writing last.safetensors and copying it to best.safetensors leaves a best older than
# last records (here: epoch 1's where epoch 2 was better). Resuming repairs it.
sf 0 b1 train "$CFG" "${S[@]}" --set train.epochs=1 --out bl
cp bl/best.safetensors epoch1_best.safetensors
sf 0 b2 train --resume bl --set train.epochs=2
cp epoch1_best.safetensors bl/best.safetensors
sf 0 b3 train --resume bl --set train.epochs=2
check "after resuming, best is the best epoch's state" "$PY" "$HERE/st_check.py" --same bl/best.safetensors slow/best.safetensors
# A best lost before its copy was made (disk full, or a kill): resuming makes it.
rm bl/best.safetensors
sf 0 b4 train --resume bl --set train.epochs=2
check "a missing best is made again" "$PY" "$HERE/st_check.py" --same bl/best.safetensors slow/best.safetensors
sf 0 b_eval eval bl --json
sf 0 slow_eval eval slow --json
"$PY" - b_eval.out slow_eval.out <<'PYEOF' || bad "eval of the repaired run differs from the run's best"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sys.exit(0 if a["test_accuracy"] == b["test_accuracy"] == 1.0 and a["firing_rates"] == b["firing_rates"] else 1)
PYEOF

# A run continued into a new directory takes its best along, though its own epochs are no better.
sf 0 fork train --resume slow --set train.epochs=3 --out forked
check "epoch 3 is not better" test "$(json_field forked/metrics.jsonl epoch best)" = False
check "a fork starts with the run's best" "$PY" "$HERE/st_check.py" --same forked/best.safetensors slow/best.safetensors

finish
