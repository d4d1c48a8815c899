#!/usr/bin/env bash
# learning_fmnist_plif.sh — the learning checks of the neuron models (docs/perf.md), on one GPU:
#  1. examples/fmnist_plif.ini (PLIF conv SNN) for the seeds given: each run's test accuracy per epoch, its final
#     one, wall time and epochs; then the mean and spread (target: >= 94.5%, Fang et al. 94.38%);
#  2. SpikingJelly's own conv_fashion_mnist script (bench/gpu/sj_conv_fashion_mnist.py, cupy, fp32) and
#     examples/fmnist_sj_csnn.ini (the same network and training, by spikefuse) for the same epochs, side by side:
#     test accuracy after every epoch and training images/s (target: within 0.5 points at every epoch, >= 2.5x
#     their images/s).
# Usage: bench/gpu/learning_fmnist_plif.sh SPIKEFUSE DATA_DIR [seeds ("0 1 2")] [plif epochs (40)] [sj epochs (3)]
# DATA_DIR holds the four Fashion-MNIST .gz files (Debian's /usr/share/datasets/fashion-mnist). Environment: OUT
# (default ./learning-out) for run directories and logs; SJ_SITE, a folder where the SpikingJelly 0.0.0.0.14 wheel
# is installed (pip install --no-deps --target), to run part 2 (skipped without it). Not run by tests/gpu.sh.
set -u -o pipefail
sf=$(realpath "$1")
data=$(realpath "$2")
seeds=${3:-"0 1 2"}
epochs=${4:-40}
sj_epochs=${5:-3}
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/learning-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1

# Per-epoch test accuracy and training samples/s of a run directory (metrics.jsonl), and the final accuracy.
epochs_of() {
    python3 - "$1" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if l.strip()]
for r in rows:
    if r.get("type") == "epoch":
        print(f"  epoch {r['epoch']}: test {100 * r['test_accuracy']:.2f}%  train {r['samples_per_s']:.0f} images/s  "
              f"({r['train_seconds']:.1f} s training, {r['test_seconds']:.1f} s test)")
EOF
}

echo "== fmnist_plif.ini: seeds $seeds, $epochs epochs"
: >"$OUT/plif_accuracies.txt"
for s in $seeds; do
    dir=$OUT/plif-seed$s
    rm -rf "$dir"
    t0=$(date +%s)
    "$sf" train examples/fmnist_plif.ini --device cuda --out "$dir" --set train.data_dir="$data" \
        --set train.seed="$s" --set train.epochs="$epochs" >"$dir.out" 2>"$dir.err" || {
        echo "seed $s failed: $(tail -3 "$dir.err")"
        exit 1
    }
    acc=$(sed -n 's/^final test accuracy \([0-9.]*\)%.*/\1/p' "$dir.out")
    echo "seed $s: final test accuracy $acc% in $(($(date +%s) - t0)) s wall, $epochs epochs"
    epochs_of "$dir"
    echo "$acc" >>"$OUT/plif_accuracies.txt"
done
awk '{v[NR] = $1; m += $1} END {
    m /= NR; for (i = 1; i <= NR; i++) sd += (v[i] - m) ^ 2; sd = NR > 1 ? sqrt(sd / (NR - 1)) : 0
    min = v[1]; max = v[1]; for (i = 2; i <= NR; i++) { if (v[i] < min) min = v[i]; if (v[i] > max) max = v[i] }
    printf "fmnist_plif: mean %.2f%%, sd %.2f, min %.2f, max %.2f over %d seeds (target >= 94.5%%)\n", m, sd, min, max, NR
}' "$OUT/plif_accuracies.txt"

echo "== side by side, $sj_epochs epochs: spikefuse (examples/fmnist_sj_csnn.ini)"
dir=$OUT/sj-csnn-spikefuse
rm -rf "$dir"
"$sf" train examples/fmnist_sj_csnn.ini --device cuda --out "$dir" --set train.data_dir="$data" \
    --set train.epochs="$sj_epochs" >"$dir.out" 2>"$dir.err" || {
    echo "spikefuse fmnist_sj_csnn failed: $(tail -3 "$dir.err")"
    exit 1
}
epochs_of "$dir"
if [ -n "${SJ_SITE:-}" ]; then
    for extra in "" "-amp"; do
        echo "== side by side: SpikingJelly conv_fashion_mnist (cupy${extra:+, amp}), $sj_epochs epochs"
        PYTHONPATH=$SJ_SITE PYTHONUNBUFFERED=1 python3 bench/gpu/sj_conv_fashion_mnist.py "$data" "$OUT/sj$extra" \
            "$sj_epochs" $extra >"$OUT/sj$extra.log" 2>&1 || echo "SpikingJelly run failed: $(tail -3 "$OUT/sj$extra.log")"
        grep -E "^epoch = |^train speed" "$OUT/sj$extra.log" | sed 's/^/  /'
    done
else
    echo "== SpikingJelly's script skipped: set SJ_SITE to a folder with spikingjelly 0.0.0.0.14 installed"
fi
