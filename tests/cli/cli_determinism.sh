# cli_determinism.sh — the same seed gives the same run (issue 46): two default CPU runs (the README's
# examples/fmnist_mlp.ini, sparse = auto as it comes, on the tiny data set, shortened by --set) end with bitwise the
# same metrics.jsonl losses and accuracies and the same checkpoint, and so does a third one stopped by SIGINT in the
# middle of its first epoch and continued with --resume. The CPU decides auto's crossovers without timing
# (src/core/sparse_tune.c), so the three runs record the same choices, and the resume keeps them.
. "$(dirname "$0")/lib.sh"

# 60 steps an epoch, so that SIGINT lands inside the first epoch even on a fast machine.
data data --train 3840 --test 100
run=(--set train.data_dir="$WORK/data" --set train.epochs=2 --set train.log_every=1)
sf 0 a train "$HERE/../../examples/fmnist_mlp.ini" "${run[@]}" --out A
sf 0 b train "$HERE/../../examples/fmnist_mlp.ini" "${run[@]}" --out B

# C: stopped by SIGINT after some steps of its first epoch (of 60), then continued
stop_after c1 C 3 train "$HERE/../../examples/fmnist_mlp.ini" "${run[@]}" --out C
check "the run stopped by SIGINT exits 130 (got $rc)" test "$rc" -eq 130
check "the run stopped by SIGINT had not finished its first epoch" test "$(json_field C/metrics.jsonl epoch epoch | wc -l)" -eq 0
cp C/choices c1.choices
sf 0 c2 train --resume C

# same NAME RUN1 RUN2: the two runs logged the same losses and accuracies and hold the same final tensors
same() {
    local f
    for f in "step loss" "step accuracy" "epoch train_loss" "epoch test_accuracy"; do
        # shellcheck disable=SC2086
        check "$1: the same '$f' in $2 and $3" \
            test "$(json_field "$2/metrics.jsonl" $f)" = "$(json_field "$3/metrics.jsonl" $f)"
    done
    check "$1: the same tensors in $2/last.safetensors and $3/last.safetensors" \
        "$PY" "$HERE/st_check.py" --same "$2/last.safetensors" "$3/last.safetensors"
}
check "the runs logged their 120 steps" test "$(json_field A/metrics.jsonl step loss | wc -l)" -eq 120
same "two fresh runs" A B
same "a run stopped and resumed against an uninterrupted one" A C
has "the run records its crossovers, chosen without timing" A/choices "sparse 3 0.125 0.125"
check "two fresh runs record the same choices" cmp -s A/choices B/choices
check "the stopped run recorded the same choices" cmp -s A/choices c1.choices
check "the resume kept the run's choices" cmp -s c1.choices C/choices
finish
