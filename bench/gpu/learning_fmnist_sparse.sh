#!/usr/bin/env bash
# learning_fmnist_sparse.sh — the learning check of event-driven training (docs/notebook/perf.md): trains
# examples/fmnist_latency_dense.ini and examples/fmnist_latency_sparse.ini (Fashion-MNIST, latency encoding, T=100;
# the sparse one with grad_threshold and grad_cut) for the seeds given, on one GPU, and prints each run's final test
# accuracy, the mean and spread of both and the difference (target: sparse within 0.5 points of dense).
# Usage: bench/gpu/learning_fmnist_sparse.sh SPIKEFUSE DATA_DIR [seeds (0 1 2)] [epochs (10)]
# Environment: OUT (default ./learning-out) for the run directories and the log. Not run by tests/gpu.sh: minutes.
set -u -o pipefail
sf=$1
data=$2
seeds=${3:-"0 1 2"}
epochs=${4:-10}
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/learning-out}
mkdir -p "$OUT"
for kind in dense sparse; do
    for s in $seeds; do
        dir=$OUT/$kind-seed$s
        rm -rf "$dir"
        "$sf" train examples/fmnist_latency_$kind.ini --device cuda --out "$dir" --set train.data_dir="$data" \
            --set train.seed="$s" --set train.epochs="$epochs" >"$dir.out" 2>"$dir.err" || {
            echo "$kind seed $s failed: $(tail -3 "$dir.err")"
            exit 1
        }
        acc=$(sed -n 's/^final test accuracy \([0-9.]*\)%.*/\1/p' "$dir.out")
        echo "$kind seed $s: test accuracy $acc% ($(tail -1 "$dir.out"))"
        echo "$kind $s $acc" >>"$OUT/accuracies.txt"
    done
done
awk '{a[$1] = a[$1] " " $3} END {
    for (k in a) {
        n = split(a[k], v, " "); m = 0; for (i = 1; i <= n; i++) m += v[i]; m /= n
        sd = 0; for (i = 1; i <= n; i++) sd += (v[i] - m) ^ 2; sd = n > 1 ? sqrt(sd / (n - 1)) : 0
        mean[k] = m; printf "%-6s mean %.2f%%  sd %.2f  over %d seeds\n", k, m, sd, n
    }
    printf "sparse - dense: %+.2f points (target: within 0.5)\n", mean["sparse"] - mean["dense"]
}' <(tail -n $(( $(echo $seeds | wc -w) * 2 )) "$OUT/accuracies.txt")
