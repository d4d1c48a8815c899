#!/usr/bin/env bash
# learning_spikformer.sh — the learning check of the spiking transformers (issue 42): examples/cifar10_spikformer.ini
# (Spikformer-4-384, T=4, batch 64) trained on CIFAR-shaped data from the synthetic source (no CIFAR-10 files
# offline: 3x32x32 spike trains of 10 classes, drawn from the seed; train.samples of them, a test split beside), for
# 3 seeds in fp32 and in bf16, the 3 seeds of one precision CONCURRENTLY on the one GPU. Per run the final and best
# test accuracy and its seconds; then per epoch the test accuracy of every run and the mean of each precision, and the
# largest gap between the two means. Targets: well above chance (10%), and the same curve in both precisions (the
# gap within the spread of the seeds).
# Usage: bench/gpu/learning_spikformer.sh BIN_DIR [seeds ("0 1 2")] [epochs (10)] [samples (20000)]
# BIN_DIR holds the spikefuse CLI. Environment: OUT (default ./learning-spikformer) for run directories and logs.
# Not run by tests/gpu.sh.
set -u -o pipefail
if [ $# -lt 1 ]; then
    sed -n '2,/^set -u/p' "$0" | sed '$d'
    exit 2
fi
sf=$(realpath "$1")/spikefuse
seeds=${2:-"0 1 2"}
epochs=${3:-10}
samples=${4:-20000}
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/learning-spikformer}
mkdir -p "$OUT"
[ -x "$sf" ] || { echo "no spikefuse CLI in $1"; exit 2; }
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
echo "== cifar10_spikformer.ini on synthetic 3x32x32, $samples samples, $epochs epochs, seeds $seeds"

for prec in fp32 bf16; do
    pids=()
    for s in $seeds; do
        dir=$OUT/$prec-seed$s
        rm -rf "$dir"
        (
            t0=$(date +%s)
            "$sf" train examples/cifar10_spikformer.ini --device cuda --out "$dir" --set train.dataset=synthetic \
                --set "train.input_shape=3,32,32" --set train.classes=10 --set train.samples="$samples" \
                --set train.epochs="$epochs" --set train.seed="$s" --set train.precision="$prec" \
                --set train.log_every=0 >"$dir.out" 2>"$dir.err"
            echo "$? $(($(date +%s) - t0))" >"$dir.rc"
        ) &
        pids+=($!)
    done
    wait "${pids[@]}"
    for s in $seeds; do
        dir=$OUT/$prec-seed$s
        rc=killed secs=?
        [ -f "$dir.rc" ] && read -r rc secs <"$dir.rc"
        if [ "$rc" != 0 ]; then
            echo "$prec seed $s failed (rc $rc): $(tail -3 "$dir.err")"
            continue
        fi
        echo "$prec seed $s: $(grep '^final test accuracy' "$dir.out") ($secs s, 3 runs sharing the GPU)"
    done
done

python3 - "$OUT" "$seeds" <<'PYEOF'
import json, os, sys
out, seeds = sys.argv[1], sys.argv[2].split()
curves = {}
for prec in ("fp32", "bf16"):
    for s in seeds:
        path = os.path.join(out, f"{prec}-seed{s}", "metrics.jsonl")
        if not os.path.exists(path):
            continue
        acc = [100 * json.loads(l)["test_accuracy"] for l in open(path) if '"type":"epoch"' in l]
        curves[(prec, s)] = acc
runs = sorted(curves)
print("epoch " + " ".join(f"{p}/s{s}" for p, s in runs) + "  fp32_mean bf16_mean")
n = min((len(c) for c in curves.values()), default=0)
gap = 0.0
for e in range(n):
    means = {}
    for prec in ("fp32", "bf16"):
        v = [curves[r][e] for r in runs if r[0] == prec]
        means[prec] = sum(v) / len(v) if v else float("nan")
    gap = max(gap, abs(means["fp32"] - means["bf16"]))
    print(f"{e + 1:5d} " + " ".join(f"{curves[r][e]:7.2f}" for r in runs) +
          f"  {means['fp32']:9.2f} {means['bf16']:9.2f}")
print(f"largest gap between the fp32 and bf16 mean curves: {gap:.2f} points (chance: 10%)")
PYEOF
