# dist_cli.sh — `spikefuse train` over several MPI processes on the CPU (run by ctest with SF_MPIRUN set):
# - the same global batch on 1 process, on 2 data-parallel ranks (synchronised BN) and on 2 time segments gives the
#   same per-step losses, test accuracies and final parameters (float sums in another order: ≤ 1e-4 relative after
#   two epochs of SGD);
# - a 2-process run resumes on 2 processes bitwise, and on 1 process within the same bound; so does a run over 2
#   time segments (whose optimizer state is sharded between them) on 2 segments;
# - bad input: a global batch the ranks do not divide, time_parallel not dividing T or the processes, configs that
#   differ between ranks; a NaN stops every process at the same step;
# - a rank killed mid-run: the others stop within seconds with a message, the last checkpoint stays valid.
. "$(dirname "$0")/../cli/lib.sh"
DIST=$HERE/../distributed
MPIRUN=(${SF_MPIRUN:?SF_MPIRUN names mpirun and its options} -x OMP_NUM_THREADS)

# mpi EXPECTED NAME NP ARGS...: spikefuse under mpirun with NP processes, like sf.
mpi() {
    local expected=$1 name=$2 np=$3
    shift 3
    "${MPIRUN[@]}" -np "$np" "$SF" "$@" >"$name.out" 2>"$name.err"
    local rc=$?
    if [ "$rc" -eq "$expected" ]; then ok; else bad "$name: mpirun -np $np spikefuse $* exited $rc, expected $expected; stderr: $(head -c 900 "$name.err")"; fi
}
close() { "$PY" "$DIST/close.py" "$@" >>close.log 2>&1; }

data data --train 192 --test 100
cfg=("$DIST/tiny_dist.ini" --set train.data_dir="$WORK/data")
sf 0 one train "${cfg[@]}" --out ONE
mpi 0 two 2 train "${cfg[@]}" --out TWO
mpi 0 time 2 train "${cfg[@]}" --set train.time_parallel=2 --out TIME
has "rank 0 alone reports" two.out "final test accuracy"
check "the other rank prints no summary" test "$(grep -c 'final test accuracy' two.out)" -eq 1
json_field ONE/metrics.jsonl step loss >one.loss
json_field TWO/metrics.jsonl step loss >two.loss
json_field TIME/metrics.jsonl step loss >time.loss
check "24 steps logged" test "$(wc -l <one.loss)" -eq 24
check "2 data ranks: the per-step losses of 1 process" close 1e-4 --lines two.loss one.loss
check "2 time segments: the per-step losses of 1 process" close 1e-4 --lines time.loss one.loss
json_field ONE/metrics.jsonl epoch test_accuracy >one.acc
json_field TWO/metrics.jsonl epoch test_accuracy >two.acc
json_field TIME/metrics.jsonl epoch test_accuracy >time.acc
check "2 data ranks: the test accuracies of 1 process" close 1e-9 --lines two.acc one.acc
check "2 time segments: the test accuracies of 1 process" close 1e-9 --lines time.acc one.acc
check "2 data ranks: the final parameters of 1 process" close 1e-4 --tensors TWO/last.safetensors ONE/last.safetensors
check "2 time segments: the final parameters of 1 process" close 1e-4 --tensors TIME/last.safetensors ONE/last.safetensors

# resume: 2 processes bitwise, 1 process within the bound
mpi 0 r1 2 train "${cfg[@]}" --set train.epochs=1 --out R
mpi 0 r2 2 train --resume R --set train.epochs=2
json_field R/metrics.jsonl step loss >r.loss
check "a 2-process run resumed on 2 processes: the same losses bitwise" cmp -s r.loss two.loss
check "... and the same tensors bitwise" "$PY" "$HERE/st_check.py" --same R/last.safetensors TWO/last.safetensors
# 2 time segments keep half of the optimizer state each: the checkpoint holds all of it, and a resumed run takes
# its own half back
mpi 0 tr1 2 train "${cfg[@]}" --set train.time_parallel=2 --set train.epochs=1 --out TR
mpi 0 tr2 2 train --resume TR --set train.epochs=2
json_field TR/metrics.jsonl step loss >tr.loss
check "a 2-segment run resumed on 2 segments: the same losses bitwise" cmp -s tr.loss time.loss
check "... and the same tensors bitwise (momentum included)" "$PY" "$HERE/st_check.py" --same TR/last.safetensors TIME/last.safetensors
mpi 0 s1 2 train "${cfg[@]}" --set train.epochs=1 --out S
sf 0 s2 train --resume S --set train.epochs=2
json_field S/metrics.jsonl step loss >s.loss
check "a 2-process run resumed by 1 process: the losses of 1 process" close 1e-4 --lines s.loss one.loss

# bad input
mpi 3 indivisible 2 train "${cfg[@]}" --set train.global_batch=15 --out BAD1
has "a global batch the ranks do not divide is named" indivisible.err "global_batch = 15 is not divisible by the 2"
mpi 3 bad_t 2 train "${cfg[@]}" --set train.time_parallel=2 --set train.timesteps=3 --out BAD2
has "time_parallel not dividing T is named" bad_t.err "does not divide train.timesteps = 3"
sf 1 alone train "${cfg[@]}" --set train.time_parallel=2 --out BAD3
has "time_parallel without the processes says how to start them" alone.err "mpirun -np 2"
"${MPIRUN[@]}" -np 1 "$SF" train "${cfg[@]}" --out BAD4 : -np 1 "$SF" train "${cfg[@]}" --set train.lr=0.06 --out BAD4 \
    >mismatch.out 2>mismatch.err
check "differing configs fail" test $? -ne 0
has "differing configs are named" mismatch.err "rank 1's resolved config (with its --set options) differs from rank 0's"
check "nothing was trained" test ! -e BAD4/last.safetensors

# NaN/Inf (inputs scaled by 1e30, as in cli_nan.sh): every process stops at the same step with exit code 4 and none
# waits in a collective for another (a NaN loss fails its own rank's step; the step's summed loss tells the others)
cat >nan.ini <<'INI'
[train]
dataset = fashion-mnist
epochs = 2
batch = 16
global_batch = 32
timesteps = 1
optimizer = sgd
lr = 0.001
std = 1e-30
threads = 1
[flatten]
[linear]
out = 10
INI
mpi 4 nan 2 train nan.ini --set train.data_dir="$WORK/data" --out NAN
# mpirun ends the other processes as soon as one exits non-zero, so the second one's message may not get out
# (CI saw it missing once): what must hold is that the job ends with 4 at that step and no process reports another
has "the processes stop at the NaN's step" nan.err "NaN/Inf at epoch 1, step 2"
check "... and none at another step" test "$(grep 'NaN/Inf at epoch' nan.err | grep -vc 'epoch 1, step 2')" -eq 0

# a rank killed in the second epoch: the job ends within seconds, epoch 1's checkpoint stays valid
data big --train 3000 --test 100
"${MPIRUN[@]}" -np 2 "$SF" train "$DIST/tiny_dist.ini" --set train.data_dir="$WORK/big" --set train.epochs=3 --out K \
    >kill.out 2>kill.err &
job=$!
victim=""
for _ in $(seq 1 1200); do
    if [ -s K/metrics.jsonl ] && grep -q '"type":"epoch"' K/metrics.jsonl; then
        for p in $(ps -o pid= --ppid "$job"); do
            grep -qz '^OMPI_COMM_WORLD_RANK=1$' "/proc/$p/environ" 2>/dev/null && victim=$p
        done
        break
    fi
    sleep 0.05
done
if [ -n "$victim" ]; then
    kill -9 "$victim"
    t0=$(date +%s)
    wait "$job"
    rc=$?
    elapsed=$(($(date +%s) - t0))
    check "the job fails when a rank dies" test "$rc" -ne 0
    check "... within 20 s (took ${elapsed} s)" test "$elapsed" -le 20
    has "... and says which rank" kill.err "rank 1"
    check "epoch 1's checkpoint stays valid" "$PY" "$HERE/st_check.py" K/last.safetensors
else
    kill "$job" 2>/dev/null
    wait "$job"
    bad "no epoch finished or rank 1 not found: $(tail -c 600 kill.err)"
fi

finish
