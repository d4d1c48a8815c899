#!/usr/bin/env bash
# accuracy_precision.sh DATA_DIR — on a GPU machine: examples/fmnist_csnn.ini (Fashion-MNIST conv SNN) trained once
# per precision and seed (default fp32 and bf16, seeds 0 1 2), each a full run of the example on the data in
# DATA_DIR; prints every run's final and best test accuracy, then per precision the mean and spread (sample standard
# deviation and range) of the final accuracies and the difference of the means from fp32 (issue 16's target: bf16
# within 0.3 points of fp32).
# Environment: PRECISIONS (default "fp32 bf16"; fp16 and tf32 may be added), SEEDS (default "0 1 2"), EPOCHS (default
# the example's), SF_GPU_BIN (a directory with the spikefuse program, e.g. from tests/gpu_bundle.sh; default
# build-gpu, then build), OUT (run directories and logs; default ./gpu-out/accuracy).
set -u -o pipefail
cd "$(dirname "$0")/../.."
data=${1:?usage: tests/gpu/accuracy_precision.sh DATA_DIR (the Fashion-MNIST files)}
OUT=${OUT:-$PWD/gpu-out/accuracy}
mkdir -p "$OUT"
bin=${SF_GPU_BIN:-}
for d in "$bin" build-gpu build; do
    if [ -n "$d" ] && [ -x "$d/spikefuse" ]; then bin=$d && break; fi
done
[ -x "$bin/spikefuse" ] || { echo "no spikefuse program (set SF_GPU_BIN or build first)"; exit 1; }
extra=()
[ -n "${EPOCHS:-}" ] && extra+=(--set "train.epochs=$EPOCHS")
results=$OUT/results.txt
: >"$results"
for p in ${PRECISIONS:-fp32 bf16}; do
    for s in ${SEEDS:-0 1 2}; do
        dir=$OUT/$p-seed$s
        rm -rf "$dir"
        t0=$(date +%s)
        line=$("$bin/spikefuse" train examples/fmnist_csnn.ini --device cuda --out "$dir" --set "train.data_dir=$data" \
            --set "train.precision=$p" --set "train.seed=$s" "${extra[@]}" 2>"$dir.log" | tail -1)
        rc=$?
        # "final test accuracy 93.13% (best 93.27%) after ..."
        final=$(sed -n 's/^final test accuracy \([0-9.]*\)% (best \([0-9.]*\)%).*/\1/p' <<<"$line")
        best=$(sed -n 's/^final test accuracy \([0-9.]*\)% (best \([0-9.]*\)%).*/\2/p' <<<"$line")
        printf '%-5s seed %s: rc=%d final %s%% best %s%% (%d s)\n' "$p" "$s" "$rc" "${final:-?}" "${best:-?}" \
            $(($(date +%s) - t0))
        [ "$rc" -eq 0 ] && [ -n "$final" ] && echo "$p $s $final $best" >>"$results"
        [ "$rc" -eq 0 ] || tail -5 "$dir.log"
    done
done
echo "== per precision: final test accuracy over seeds (mean, sample std, min-max), best epoch's mean"
awk '{ n[$1]++; s[$1] += $3; q[$1] += $3 * $3; b[$1] += $4
       if (!($1 in lo) || $3 < lo[$1]) lo[$1] = $3
       if (!($1 in hi) || $3 > hi[$1]) hi[$1] = $3 }
     END { for (p in n) {
             m = s[p] / n[p]; sd = n[p] > 1 ? sqrt((q[p] - n[p] * m * m) / (n[p] - 1)) : 0
             printf "%-5s n=%d mean %.2f%% std %.2f min %.2f max %.2f | best-epoch mean %.2f%%", p, n[p], m, sd, lo[p], \
                    hi[p], b[p] / n[p]
             if ("fp32" in n && p != "fp32") printf " | mean - fp32 mean: %+.2f points", m - s["fp32"] / n["fp32"]
             printf "\n" } }' "$results" | sort
