# cli_determinism.sh — the same seed gives the same run: two default CPU runs (the README's examples/fmnist_mlp.ini,
# sparse = auto as it comes, on the tiny data set) end with bitwise the same metrics.jsonl losses and accuracies and
# the same checkpoint, and so does a third one stopped by SIGINT in the middle and continued with --resume.
#
# PENDING (issue 46, the engine's part): sparse = auto measures its crossovers by timing when each process compiles
# the network, so two fresh runs may choose other paths and differ in their last bits. Until the engine decides
# them without a clock (or from a record handed to it before it compiles), a difference here is reported and the
# test is skipped (exit 77); set ENGINE_DECIDES_WITHOUT_TIMING=1 when that lands, and a difference fails it.
. "$(dirname "$0")/lib.sh"
ENGINE_DECIDES_WITHOUT_TIMING=0

data data --train 1280
run=(--set train.data_dir="$WORK/data" --set train.epochs=2 --set train.log_every=1)
sf 0 a train "$HERE/../../examples/fmnist_mlp.ini" "${run[@]}" --out A
sf 0 b train "$HERE/../../examples/fmnist_mlp.ini" "${run[@]}" --out B

# C: stopped by SIGINT after some steps of its first epoch, then continued
stop_after c1 C 7 train "$HERE/../../examples/fmnist_mlp.ini" "${run[@]}" --out C
check "the run stopped by SIGINT exits 130 (got $rc)" test "$rc" -eq 130
sf 0 c2 train --resume C

# same RUN1 RUN2: whether the two runs logged the same losses and accuracies and hold the same final tensors
same() {
    local f
    for f in "step loss" "step accuracy" "epoch train_loss" "epoch test_accuracy"; do
        # shellcheck disable=SC2086
        [ "$(json_field "$1/metrics.jsonl" $f)" = "$(json_field "$2/metrics.jsonl" $f)" ] || return 1
    done
    "$PY" "$HERE/st_check.py" --same "$1/last.safetensors" "$2/last.safetensors"
}
check "the runs logged their 40 steps" test "$(json_field A/metrics.jsonl step loss | wc -l)" -eq 40
differ=""
same A B || differ="$differ two fresh runs;"
same A C || differ="$differ a run stopped and resumed against an uninterrupted one;"
if [ -z "$differ" ]; then
    ok
elif [ "$ENGINE_DECIDES_WITHOUT_TIMING" = 1 ]; then
    bad "the same seed gave other runs:$differ (see A, B, C in $WORK)"
else
    echo "$TEST_NAME: SKIPPED, pending the engine's part of issue 46: the same seed gave other runs:$differ" \
        "sparse = auto measured its crossovers differently in the processes (A, B, C in $WORK)" >&2
    finish || exit 1 # another check failed: that is no skip
    exit 77
fi
finish
