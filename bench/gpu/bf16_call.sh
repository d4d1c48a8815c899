#!/usr/bin/env bash
# bf16_call.sh — the bf16 step against its floor and against SpikingJelly's fastest mode, in one call on one GPU
# (docs/notebook/perf.md, "W3 in bf16 against its floor"): the GPU tests, W3 bf16 with its per-layer floors and conv
# algorithms, W1 bf16 at every T, Nsight Compute over one whole W3 bf16 step and over W1's kernels, spikefuse's W6
# and W7 bf16 points, SpikingJelly 2.x on the same points in its default and its fastest mode (cuDNN's autotuner and
# torch.compile under bf16 autocast), and W8's images/s against SpikingJelly's own script when its data is there.
# Each phase's output goes to $WORK/<phase>.txt; at the end $OUT gets summary.txt and bf16_call.tar.gz (all of
# $WORK), and the summary is printed last. Phases that would overrun BUDGET_S (default 450 s) are cut short by
# `timeout` or skipped; what they had measured stays.
#
# Usage, from the repository root on the GPU machine, with the programs built elsewhere (tests/gpu_bundle.sh):
#   tar -C .carry -xJf .carry/gpu.tar.xz
#   SF_GPU_BIN=$PWD/.carry/gpu/bin SJ_WHEELS=<folder of spikingjelly-2.x wheels> bench/gpu/bf16_call.sh
# Environment: OUT (default ./bf16-out), WORK (default /tmp/bf16-call); SF_GPU_BIN (the programs; their libraries
# in ../lib beside it); SJ_WHEELS (SpikingJelly 2.x: its Triton neurons; no peer phases without it); SJ14_WHEELS
# and W8_DATA (SpikingJelly 0.0.0.0.14 and the four Fashion-MNIST .gz files: W8, skipped without them); TESTS=0
# skips tests/gpu.sh; PYTHON (default python3, one with torch 2.x). About 7.5 minutes on an H200 with everything.
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/bf16-out}
WORK=${WORK:-/tmp/bf16-call}
BIN=${SF_GPU_BIN:?SF_GPU_BIN: the folder of the bundled programs (tests/gpu_bundle.sh)}
PYTHON=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-450}
export LD_LIBRARY_PATH=$BIN/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rm -rf "$WORK"
mkdir -p "$OUT" "$WORK"
start=$(date +%s)
summary=()
left() { echo $((BUDGET_S - ($(date +%s) - start))); }
# phase NAME SECONDS COMMAND...: runs it under a timeout of at most SECONDS (less where the budget has less),
# output to $WORK/NAME.txt; skipped under 20 s of budget
phase() {
    local name=$1 most=$2 t0 rc lim
    shift 2
    lim=$(left)
    [ "$lim" -gt "$most" ] && lim=$most
    if [ "$lim" -lt 20 ]; then
        summary+=("$(printf '%-22s skipped (budget)' "$name")")
        return 0
    fi
    echo "== $name (at most $lim s): $*"
    t0=$(date +%s)
    timeout "$lim" "$@" >"$WORK/$name.txt" 2>&1
    rc=$?
    grep -v '^"' "$WORK/$name.txt" | tail -30
    summary+=("$(printf '%-22s rc=%-4s %4d s' "$name" "$rc" $(($(date +%s) - t0)))")
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader |
    tee "$WORK/card.txt"
git rev-parse --short HEAD 2>/dev/null | sed 's/^/git /' | tee -a "$WORK/card.txt"

[ "${TESTS:-1}" = 1 ] && phase tests 120 env OUT="$WORK/tests" SF_GPU_BIN="$BIN" tests/gpu.sh --tests-only

phase w3_bf16 90 "$BIN/bench_w3_vgg9" 10 bf16
phase w1_bf16 60 "$BIN/bench_w1_lif" 0 bf16

# Nsight Compute over one whole recompute step (the plan's measurements are outside cudaProfilerStart/Stop)
NCU_METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum
NCU_METRICS=$NCU_METRICS,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread
NCU_METRICS=$NCU_METRICS,sm__warps_active.avg.pct_of_peak_sustained_active
phase ncu_w3_step 120 env SF_BENCH_PROFILE_STEP=1 ncu --profile-from-start off --clock-control none \
    --metrics "$NCU_METRICS" --csv "$BIN/bench_w3_vgg9" 1 bf16 graph=0
phase ncu_w1 60 sh -c "for T in 4 256 1024; do ncu --clock-control none --launch-count 12 \
    --metrics '$NCU_METRICS' --csv '$BIN/bench_w1_lif' \$T bf16 auto; done"

# spikefuse on the W6 / W7 bf16 points the peers run below (W6 large at T = 10 is W3)
phase seed_sf 90 sh -c "'$BIN/bench_seed' --device cuda --workload W6 --nets small,medium,large --T 10 \
    --precision bf16 --memory recompute,lean --json '$WORK/seed_spikefuse.json' &&
    '$BIN/bench_seed' --device cuda --workload W7 --nets sj_resnet18 --T 4,16 --precision bf16 --memory recompute \
    --json '$WORK/seed_spikefuse_w7.json'"

if [ -n "${SJ_WHEELS:-}" ]; then
    rm -rf /tmp/bf16_sj2 && "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target /tmp/bf16_sj2 \
        "$SJ_WHEELS"/*.whl
    peer() { # NAME SECONDS seed_torch arguments...: SpikingJelly 2.x on points of W6/W7 in bf16
        local name=$1 most=$2
        shift 2
        phase "$name" "$most" env PYTHONPATH=/tmp/bf16_sj2 "$PYTHON" bench/peers/seed_torch.py --device cuda \
            --precision bf16 --impls sj --reps 10 --json "$WORK/seed_$name.json" "$@"
    }
    peer peer_w3_default 60 --workload W6 --nets large --T 10
    peer peer_w3_fastest 150 --workload W6 --nets large --T 10 --cudnn-benchmark --compile
    peer peer_w7_fastest 120 --workload W7 --nets sj_resnet18 --T 4,16 --cudnn-benchmark --compile
    peer peer_w6_fastest 150 --workload W6 --nets small,medium --T 10 --cudnn-benchmark --compile
    # spikefuse's points beside every peer point of the same net, T and precision
    "$PYTHON" bench/seed_report.py "$WORK"/seed_spikefuse.json "$WORK"/seed_spikefuse_w7.json \
        "$WORK"/seed_peer_*.json >"$WORK/seed_report.txt" 2>&1
fi

if [ -n "${SJ14_WHEELS:-}" ] && [ -n "${W8_DATA:-}" ] && [ -d "${W8_DATA:-}" ]; then
    rm -rf /tmp/bf16_sj14 && "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target /tmp/bf16_sj14 \
        "$SJ14_WHEELS"/*.whl
    phase w8_spikefuse 60 "$BIN/spikefuse" train examples/fmnist_sj_csnn.ini --device cuda --out "$WORK/w8_sf" \
        --set train.data_dir="$W8_DATA" --set train.epochs=1 --set train.precision=bf16
    phase w8_sj_amp_bench 90 env SJ_CUDNN_BENCH=1 PYTHONPATH=/tmp/bf16_sj14 PYTHONUNBUFFERED=1 "$PYTHON" \
        bench/gpu/sj_conv_fashion_mnist.py "$W8_DATA" "$WORK/w8_sj" 1 -amp
fi

# the summary: W3 bf16 against the peer's fastest point, W1 against its floor, the step's costliest kernels
"$PYTHON" - "$WORK" >"$WORK/summary.txt" 2>&1 <<'EOF'
import csv, glob, json, os, re, sys
out = sys.argv[1]
def read(name):
    p = os.path.join(out, name)
    return open(p, errors="replace").read() if os.path.exists(p) else ""
def ncu_kernels(lines):
    """{launch id: {"name", metric: value}} of ncu --csv rows"""
    rows = list(csv.reader(lines))
    if not rows:
        return {}
    h = rows[0]
    ki, mi, vi, ii = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value"), h.index("ID")
    k = {}
    for r in rows[1:]:
        if len(r) <= vi or r[ii] == "ID":
            continue
        d = k.setdefault(r[ii], {"name": r[ki]})
        try:
            d[r[mi]] = float(r[vi].replace(",", ""))
        except ValueError:
            pass
    return k
w3 = re.search(r"^recompute\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+([\d.]+)\s+\d+\s+(\d+)", read("w3_bf16.txt"), re.M)
print("== W3 bf16 recompute: " + (f"{w3.group(1)} ms/step, floor {w3.group(2)} ms ({w3.group(3)}x), peak "
                                  f"{w3.group(4)} MiB" if w3 else "no result"))
peers = []
for f in glob.glob(f"{out}/seed_peer_*.json"):
    for p in json.load(open(f))["points"]:
        if p.get("ok"):
            peers.append(p)
for p in sorted(peers, key=lambda p: (p["workload"], p["net"], p["T"], p["ms"])):
    line = f"   peer {p['workload']} {p['net']} T={p['T']} {p['impl']}: {p['ms']:.2f} ms, peak {p['peak_mib']:.0f} MiB"
    if w3 and p["net"] == "large" and p["T"] == 10:
        line += f"  -> spikefuse {float(p['ms']) / float(w3.group(1)):.2f}x its speed at " \
                f"{float(w3.group(4)) / p['peak_mib']:.2f}x its memory"
    print(line)
print("== W1 bf16, automatic configuration: T, fwd+bwd ms, % of copy bandwidth")
for m in re.finditer(r"^\s*(\d+)\s+\d+\s+auto\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+\d+\s+([\d.]+)%",
                     read("w1_bf16.txt"), re.M):
    print(f"   T={m.group(1):>5}  {m.group(2)} ms  {m.group(3)}%")
k = ncu_kernels([l for l in read("ncu_w3_step.txt").splitlines() if l.startswith('"')])
if k:
    by = {}
    for d in k.values():
        name = re.sub(r"\(.*", "", d["name"])[:70]
        b = by.setdefault(name, [0, 0.0, 0.0])
        b[0] += 1
        b[1] += d.get("gpu__time_duration.sum", 0) / 1e3
        b[2] += (d.get("dram__bytes_read.sum", 0) + d.get("dram__bytes_write.sum", 0)) / 1e6
    total = sum(b[1] for b in by.values())
    print(f"== one W3 bf16 step under ncu: {len(k)} kernels, {total / 1e3:.2f} ms of kernel time; the costliest:")
    for name, (n, us, mb) in sorted(by.items(), key=lambda kv: -kv[1][1])[:18]:
        print(f"   {us / 1e3:7.3f} ms {n:4d}x {mb / us if us else 0:5.2f} TB/s  {name}")
sections, cur = [], None
for l in read("ncu_w1.txt").splitlines():
    if l.startswith('"ID"'):
        cur = [l]
        sections.append(cur)
    elif l.startswith('"') and cur is not None:
        cur.append(l)
if sections:
    print("== W1 bf16 kernels under ncu (T·M = 2^25): mean µs, TB/s, warp instructions x 32 per element, registers")
for T, sec in zip((4, 256, 1024), sections):
    by = {}
    for d in ncu_kernels(sec).values():
        kind = "forward" if "forward" in d["name"] else "backward" if "backward" in d["name"] else None
        if kind:
            by.setdefault(kind, []).append(d)
    for kind, ds in sorted(by.items(), key=lambda kv: kv[0] != "forward"):
        us = sum(d.get("gpu__time_duration.sum", 0) for d in ds) / len(ds) / 1e3
        tb = sum(d.get("dram__bytes_read.sum", 0) + d.get("dram__bytes_write.sum", 0) for d in ds) / len(ds) / 1e6
        inst = sum(d.get("smsp__inst_executed.sum", 0) for d in ds) / len(ds) * 32 / 2 ** 25
        print(f"   T={T:>5} {kind:8s} {us:7.1f} µs {tb / us if us else 0:5.2f} TB/s {inst:5.1f} instr/elem "
              f"{ds[0].get('launch__registers_per_thread', 0):.0f} regs ({len(ds)} launches)")
for l in read(os.path.join("w8_sf", "metrics.jsonl")).splitlines():
    r = json.loads(l) if l.strip() else {}
    if r.get("type") == "epoch":
        print(f"   W8 spikefuse bf16, epoch {r['epoch']}: {r.get('samples_per_s', 0):.0f} images/s, "
              f"test accuracy {100 * r.get('test_accuracy', 0):.2f}%")
for l in read("w8_sj_amp_bench.txt").splitlines():
    if "images/s" in l or l.startswith("epoch ="):
        print(f"   W8 SpikingJelly -amp -cupy, cuDNN autotuner: {l.strip()[:150]}")
if read("seed_report.txt"):
    print("== seed_report (speed = peer ms / spikefuse ms, memory = spikefuse peak / peer peak)")
    print(read("seed_report.txt").rstrip())
EOF
{
    echo "== phases ($(($(date +%s) - start)) s in all)"
    for l in "${summary[@]}"; do echo "$l"; done
} >>"$WORK/summary.txt"
cp "$WORK/summary.txt" "$OUT/"
tar -C "$WORK" -czf "$OUT/bf16_call.tar.gz" .
cat "$WORK/summary.txt"
