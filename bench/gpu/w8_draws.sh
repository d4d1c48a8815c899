#!/usr/bin/env bash
# w8_draws.sh — workload W8's accuracy curve over several draws a side (docs/notebook/perf.md, W8): examples/fmnist_sj_csnn.ini
# in each spikefuse precision asked for, at seeds FIRST..FIRST+N-1, and SpikingJelly 0.0.0.0.14's own
# conv_fashion_mnist script N times per mode (bench/gpu/sj_conv_fashion_mnist.py; it takes no seed, so each run is a
# draw), all at once on the one GPU: accuracy only, their images/s are not measurements (learning_fmnist_plif.sh
# times each side alone). Prints, per side and epoch, the test accuracy's mean ± sample sd, then each pairing's
# difference of means ± its standard error. On an H200, 20 runs of 3 epochs take about 2.5 minutes.
# Usage: bench/gpu/w8_draws.sh BIN_DIR DATA_DIR [draws (5)] [first seed (0)] [epochs (3)]
# BIN_DIR holds the spikefuse CLI; DATA_DIR the four Fashion-MNIST .gz files. Environment: OUT (default ./w8-out);
# SF_PRECISIONS (default "tf32 bf16"; empty: their script alone, BIN_DIR then needs no CLI); SJ_MODES (default
# "fp32 amp"; also "tf32mm": TF32 in their linear layers too,
# SJ_MATMUL_TF32=1; "ampbench": -amp with cuDNN's autotuner, SJ_CUDNN_BENCH=1, their script's fastest setting;
# "fusetf32", "fusebf16": their script with its network passed through spikefuse.torch.fuse, SJ_FUSE=tf32, and
# SJ_FUSE=bf16 with -amp, W12; PYTHONPATH must reach spikefuse then);
# PAIRS (default "tf32:fp32 bf16:amp": spikefuse precision:SpikingJelly mode; a name that is no spikefuse
# precision run here is a SpikingJelly mode, so "fusebf16:ampbench" pairs two modes of their script); SJ_SITE (default
# /tmp/sj14) where the SpikingJelly wheel is installed, with PYTHON (default python3: torch, torchvision and cupy).
set -u -o pipefail
sf_precisions=${SF_PRECISIONS-tf32 bf16}
[ -n "$sf_precisions" ] || SF_CLI_NEEDED=0
. "$(dirname "$0")/learning_setup.sh" w8-out "$@"
draws=${3:-5}
first=${4:-0}
epochs=${5:-3}
[ -d "$SJ_SITE/spikingjelly" ] || { echo "no spikingjelly in SJ_SITE=$SJ_SITE (pip install --target it)"; exit 2; }

pids=()
for i in $(seq 0 $((draws - 1))); do
    s=$((first + i))
    for p in $sf_precisions; do
        rm -rf "$OUT/sf-$p-$s"
        "$sf" train examples/fmnist_sj_csnn.ini --device cuda --out "$OUT/sf-$p-$s" --set train.data_dir="$data" \
            --set train.seed="$s" --set train.epochs="$epochs" --set train.precision="$p" \
            >"$OUT/sf-$p-$s.out" 2>"$OUT/sf-$p-$s.err" &
        pids+=($!)
    done
    for m in ${SJ_MODES:-fp32 amp}; do
        flag="" tf32mm=0 bench=0 fuse=""
        [ "$m" = amp ] && flag=-amp
        [ "$m" = ampbench ] && flag=-amp bench=1
        [ "$m" = tf32mm ] && tf32mm=1
        [ "$m" = fusetf32 ] && fuse=tf32
        [ "$m" = fusebf16 ] && fuse=bf16 flag=-amp
        SJ_FUSE=$fuse SJ_MATMUL_TF32=$tf32mm SJ_CUDNN_BENCH=$bench PYTHONPATH=$SJ_SITE${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 \
            ${PYTHON:-python3} bench/gpu/sj_conv_fashion_mnist.py "$data" "$OUT/sj-$m-$i" "$epochs" $flag \
            >"$OUT/sj-$m-$i.log" 2>&1 &
        pids+=($!)
    done
done
wait "${pids[@]}"
grep -l -E "Traceback|Error" "$OUT"/sj-*.log "$OUT"/sf-*.err 2>/dev/null | sed 's/^/failed: /'
echo "== $(date -u +%FT%TZ) ${#pids[@]} runs done"

python3 - "$OUT" "${PAIRS:-tf32:fp32 bf16:amp}" <<'EOF'
import glob, json, math, os, re, statistics as st, sys
out, pairs = sys.argv[1], [p.split(":") for p in sys.argv[2].split()]
acc = {}  # side -> epoch -> [test accuracy %]
for path in glob.glob(f"{out}/sf-*/metrics.jsonl"):
    side = "spikefuse " + os.path.basename(os.path.dirname(path)).split("-")[1]
    for line in open(path):
        r = json.loads(line) if line.strip() else {}
        if r.get("type") == "epoch":
            acc.setdefault(side, {}).setdefault(int(r["epoch"]), []).append(100 * r["test_accuracy"])
for path in glob.glob(f"{out}/sj-*.log"):
    side = "SpikingJelly " + os.path.basename(path).split("-")[1]
    for line in open(path):  # "epoch = E, ..., test_acc = A, ...": epochs count from 0
        m = re.search(r"^epoch = (\d+).*test_acc =\s*([0-9.]+)", line)
        if m:
            acc.setdefault(side, {}).setdefault(int(m.group(1)) + 1, []).append(100 * float(m.group(2)))
sd = lambda v: st.stdev(v) if len(v) > 1 else 0.0
for side in sorted(acc):
    print(f"{side:>22}: " + " | ".join(f"epoch {e} {st.mean(v):.2f} ± {sd(v):.2f} (n={len(v)})"
                                       for e, v in sorted(acc[side].items())))
side_of = lambda name: acc.get("spikefuse " + name) or acc.get("SpikingJelly " + name, {})
for p, m in pairs:
    a, b = side_of(p), side_of(m)
    cells = [f"epoch {e} {st.mean(a[e]) - st.mean(b[e]):+.2f} ± {math.sqrt(sd(a[e]) ** 2 / len(a[e]) + sd(b[e]) ** 2 / len(b[e])):.2f}"
             for e in sorted(set(a) & set(b))]
    print(f"{p} - {m}: " + (" | ".join(cells) or "no common epochs"))
EOF
