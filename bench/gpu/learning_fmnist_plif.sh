#!/usr/bin/env bash
# learning_fmnist_plif.sh — the learning checks of the neuron models (docs/notebook/perf.md), on one GPU (on an H200 the
# three 50-epoch PLIF seeds at once take about 5 minutes, the side-by-side part about 2):
#  1. examples/fmnist_plif.ini (PLIF conv SNN) for 3 seeds, run CONCURRENTLY on the one GPU (background processes:
#     their seconds and images/s are measured sharing the card); per seed the final test accuracy, epochs and
#     seconds, then mean ± sample std (target: >= 94.5%, Fang et al. 94.38%);
#  2. side by side, each run alone on the card: examples/fmnist_sj_csnn.ini (spikefuse) and SpikingJelly's own
#     conv_fashion_mnist script (bench/gpu/sj_conv_fashion_mnist.py: cupy fp32, then cupy + AMP) for the same epochs;
#     per epoch the test accuracy and training images/s of each (target: within 0.5 points at every epoch, >= 2.5x
#     their images/s). One draw a side shows the speed; bench/gpu/w8_draws.sh gives the accuracy curve over many.
# Usage: bench/gpu/learning_fmnist_plif.sh BIN_DIR DATA_DIR [seeds ("0 1 2")] [plif epochs (50)] [sj epochs (3)]
# BIN_DIR holds the spikefuse CLI; DATA_DIR the four Fashion-MNIST .gz files (Debian's
# /usr/share/datasets/fashion-mnist). Environment: OUT (default ./learning-out) for run directories and logs;
# SJ_SITE (default /tmp/sj14), where the SpikingJelly 0.0.0.0.14 wheel is installed (pip install --target), for
# part 2's SpikingJelly runs (skipped without it), with PYTHON (default python3: one with torch, torchvision and
# cupy). Not run by tests/gpu.sh.
set -u -o pipefail
. "$(dirname "$0")/learning_setup.sh" learning-out "$@"
seeds=${3:-"0 1 2"}
epochs=${4:-50}
sj_epochs=${5:-3}

# "epoch accuracy% images/s" per epoch of a spikefuse run directory (metrics.jsonl).
sf_epochs() {
    python3 - "$1" <<'EOF'
import json, sys
for line in open(sys.argv[1] + "/metrics.jsonl"):
    r = json.loads(line) if line.strip() else {}
    if r.get("type") == "epoch":
        print(r["epoch"], f"{100 * r['test_accuracy']:.2f}", f"{r['samples_per_s']:.0f}")
EOF
}

echo "== 1. fmnist_plif.ini: seeds $seeds, $epochs epochs each, all seeds at once on this GPU"
pids=()
for s in $seeds; do
    dir=$OUT/plif-seed$s
    rm -rf "$dir"
    (
        t0=$(date +%s)
        "$sf" train examples/fmnist_plif.ini --device cuda --out "$dir" --set train.data_dir="$data" \
            --set train.seed="$s" --set train.epochs="$epochs" >"$dir.out" 2>"$dir.err"
        rc=$?
        echo "$rc $(($(date +%s) - t0))" >"$dir.rc"
    ) &
    pids+=($!)
done
wait "${pids[@]}"
: >"$OUT/plif_accuracies.txt"
for s in $seeds; do
    dir=$OUT/plif-seed$s
    rc=killed secs=?
    [ -f "$dir.rc" ] && read -r rc secs <"$dir.rc"
    if [ "$rc" != 0 ]; then
        echo "seed $s failed (rc $rc): $(tail -3 "$dir.err")"
        continue
    fi
    acc=$(sed -n 's/^final test accuracy \([0-9.]*\)%.*/\1/p' "$dir.out")
    best=$(sed -n 's/^final test accuracy [0-9.]*% (best \([0-9.]*\)%).*/\1/p' "$dir.out")
    done_epochs=$(sed -n 's/^final test accuracy .* after \([0-9]*\) epochs.*/\1/p' "$dir.out")
    ips=$(sf_epochs "$dir" | awk '{s += $3; n++} END {if (n) printf "%.0f", s / n}')
    echo "seed $s: final test accuracy $acc% (best $best%), $done_epochs epochs, $secs s wall (concurrent), $ips images/s"
    echo "$acc" >>"$OUT/plif_accuracies.txt"
done
awk '{v[NR] = $1; m += $1} END {
    if (NR == 0) { print "fmnist_plif: no run finished"; exit }
    m /= NR; for (i = 1; i <= NR; i++) sd += (v[i] - m) ^ 2; sd = NR > 1 ? sqrt(sd / (NR - 1)) : 0
    min = v[1]; max = v[1]; for (i = 2; i <= NR; i++) { if (v[i] < min) min = v[i]; if (v[i] > max) max = v[i] }
    printf "fmnist_plif: %.2f%% ± %.2f (sample std), min %.2f, max %.2f over %d seeds (target >= 94.5%%)\n", m, sd, min, max, NR
}' "$OUT/plif_accuracies.txt"

echo "== 2. side by side, $sj_epochs epochs, each run alone on the card"
dir=$OUT/sj-csnn-spikefuse
rm -rf "$dir"
"$sf" train examples/fmnist_sj_csnn.ini --device cuda --out "$dir" --set train.data_dir="$data" \
    --set train.epochs="$sj_epochs" >"$dir.out" 2>"$dir.err" || echo "spikefuse fmnist_sj_csnn failed: $(tail -3 "$dir.err")"
sf_epochs "$dir" >"$OUT/sf.epochs" 2>/dev/null
runs="sf"
if [ -d "$SJ_SITE/spikingjelly" ]; then
    for extra in "" "-amp"; do
        log=$OUT/sj$extra.log
        PYTHONPATH=$SJ_SITE${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 ${PYTHON:-python3} \
            bench/gpu/sj_conv_fashion_mnist.py "$data" "$OUT/sj$extra" "$sj_epochs" $extra >"$log" 2>&1 || echo "SpikingJelly$extra failed: $(tail -3 "$log")"
        # "epoch = E, ... test_acc = A, ..." then "train speed = S images/s, ...": epochs count from 0
        awk '/^epoch = / {gsub(",", ""); for (i = 1; i <= NF; i++) if ($i == "test_acc") a = $(i + 2); e = $3 + 1}
             /^train speed/ {printf "%d %.2f %.0f\n", e, 100 * a, $4}' \
            "$log" >"$OUT/sj$extra.epochs"
        runs="$runs sj$extra"
    done
else
    echo "   (SpikingJelly skipped: no spikingjelly in SJ_SITE=$SJ_SITE)"
fi
python3 - "$OUT" $runs <<'EOF'
import sys
out, runs = sys.argv[1], sys.argv[2:]
names = {"sf": "spikefuse", "sj": "SJ cupy fp32", "sj-amp": "SJ cupy+AMP"}
table = {}
for r in runs:
    try:
        table[r] = {int(e): (float(a), float(s)) for e, a, s in (l.split() for l in open(f"{out}/{r}.epochs") if l.strip())}
    except (OSError, ValueError):
        table[r] = {}
epochs = sorted(set().union(*[set(t) for t in table.values()]))
print("epoch  " + "  ".join(f"{names[r]:>22}" for r in runs) + "   (test accuracy %, training images/s)")
for e in epochs:
    cells = [f"{table[r][e][0]:6.2f}% {table[r][e][1]:9.0f}/s" if e in table[r] else f"{'-':>22}" for r in runs]
    line = f"{e:5d}  " + "  ".join(f"{c:>22}" for c in cells)
    for r in runs[1:]:
        if e in table["sf"] and e in table[r]:
            line += f"   vs {names[r]}: {table['sf'][e][0] - table[r][e][0]:+.2f} pt, {table['sf'][e][1] / table[r][e][1]:.2f}x"
    print(line)
EOF
