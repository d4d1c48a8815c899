#!/usr/bin/env bash
# run_seed_benchmarks.sh — workloads W6 and W7 (docs/notebook/perf.md) in one go: spikefuse's sweep (bench_seed), the
# baselines on the same networks in the same run (bench/peers/seed_torch.py: plain PyTorch BPTT, SpikingJelly once
# per installed version, snnTorch), then the table (bench/seed_report.py). JSON and logs go to $OUT; the table and a
# line per phase with its time come last.
#
# On a GPU machine, from a copy of the repository with the programs built here (tests/gpu_bundle.sh):
#   tar -C .carry -xJf .carry/gpu.tar.xz
#   SEED_WHEELS=<folder>:<folder> LD_LIBRARY_PATH=$PWD/.carry/gpu/lib SF_GPU_BIN=$PWD/.carry/gpu/bin \
#     bench/run_seed_benchmarks.sh
# --smoke: the CI-sized run on the CPU (ctest bench_seed_smoke): every network at widths / 8, batch 2, T 2, against
#   plain PyTorch only; it checks that everything runs, passes its checks and builds the same networks on both sides.
# Environment:
#   OUT           where results go (default ./seed-out)
#   BENCH_SEED    the bench_seed program (default $SF_GPU_BIN/bench_seed, else build/bench_seed)
#   PYTHON        a Python with torch (default python3)
#   SEED_WHEELS   folders of peer wheels separated by ':' (SpikingJelly 0.0.0.0.14 has the cupy backend, 2.x the
#                 Triton one; snnTorch in either): each goes into its own site and its own peer process, which skips
#                 the points an earlier one measured
#   SEED_ONLY     W6 or W7: one workload only
#   SEED_T        comma-separated T for every network instead of each workload's (e.g. 2,10 for a quick look)
#   SEED_REPS     timed steps per point (default 10)
#   SEED_MEMORY   spikefuse's memory modes (default recompute,lean: Liang et al.'s dataflow, and spikes as bits with
#                 the convolutions rerun; the report checks that the CPU's smoke run gives both the same losses)
#   SEED_PEER_FASTEST  1 (default): SpikingJelly also in its fastest mode, cuDNN's autotuner and torch.compile
#                 (seed_torch.py --cudnn-benchmark --compile), one more process per version; 0: its default mode only
set -u -o pipefail
cd "$(dirname "$0")/.."
SMOKE=0
[ "${1:-}" = --smoke ] && SMOKE=1
OUT=${OUT:-$PWD/seed-out}
PYTHON=${PYTHON:-python3}
BENCH_SEED=${BENCH_SEED:-${SF_GPU_BIN:+$SF_GPU_BIN/bench_seed}}
BENCH_SEED=${BENCH_SEED:-build/bench_seed}
mkdir -p "$OUT"
rm -f "$OUT"/seed_*.json
phases=()
status=0
start=$(date +%s)
phase() { # name, command...: runs it with its output in $OUT/<name>.log and on stdout, and records its time
    local name=$1 t0=$(date +%s) rc
    shift
    echo "== $name: $*"
    "$@" 2>&1 | tee "$OUT/$name.log"
    rc=${PIPESTATUS[0]}
    phases+=("$(printf '%-28s rc=%-3s %5d s' "$name" "$rc" $(($(date +%s) - t0)))")
    [ "$rc" -eq 0 ] || status=1
}

common=()
modes=(--memory "${SEED_MEMORY:-recompute,lean}")
[ -n "${SEED_ONLY:-}" ] && common+=(--workload "$SEED_ONLY")
[ -n "${SEED_T:-}" ] && common+=(--T "$SEED_T")
if [ $SMOKE = 1 ]; then
    phase bench_seed "$BENCH_SEED" --smoke --device cpu "${common[@]}" "${modes[@]}" --json "$OUT/seed_spikefuse.json"
    phase peers_torch "$PYTHON" bench/peers/seed_torch.py --smoke --device cpu --impls torch "${common[@]}" \
        --json "$OUT/seed_peers_1.json"
else
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/card.txt"
    reps=(--steps "${SEED_REPS:-10}")
    phase bench_seed "$BENCH_SEED" --device cuda "${common[@]}" "${modes[@]}" "${reps[@]}" \
        --json "$OUT/seed_spikefuse.json"
    # W6 against plain PyTorch (Liang et al.'s reference) and SpikingJelly cupy; W7 against every SpikingJelly
    # implementation and snnTorch. One process per SpikingJelly version, each skipping what was measured before.
    sites=("")
    n=0
    IFS=: read -r -a wheel_dirs <<<"${SEED_WHEELS:-}"
    for d in "${wheel_dirs[@]}"; do
        n=$((n + 1))
        rm -rf "/tmp/seed_site_$n"
        "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "/tmp/seed_site_$n" "$d"/*.whl &&
            sites+=("/tmp/seed_site_$n")
    done
    [ ${#sites[@]} -gt 1 ] && sites=("${sites[@]:1}")
    n=0
    done_files=()
    for site in "${sites[@]}"; do
        n=$((n + 1))
        phase "peers_$n" env PYTHONPATH="$site" "$PYTHON" bench/peers/seed_torch.py --device cuda "${common[@]}" \
            --reps "${SEED_REPS:-10}" --impls-w6 torch,sj_cupy --impls-w7 sj,snntorch \
            --skip-done "${done_files[@]}" --json "$OUT/seed_peers_$n.json"
        done_files+=("$OUT/seed_peers_$n.json")
    done
    if [ "${SEED_PEER_FASTEST:-1}" = 1 ]; then
        n=0
        for site in "${sites[@]}"; do
            n=$((n + 1))
            phase "peers_fastest_$n" env PYTHONPATH="$site" "$PYTHON" bench/peers/seed_torch.py --device cuda \
                "${common[@]}" --reps "${SEED_REPS:-10}" --impls sj --cudnn-benchmark --compile \
                --skip-done "${done_files[@]}" --json "$OUT/seed_peers_fastest_$n.json"
            done_files+=("$OUT/seed_peers_fastest_$n.json")
        done
    fi
fi
phase report "$PYTHON" bench/seed_report.py "$OUT"/seed_spikefuse.json "$OUT"/seed_peers_*.json \
    --markdown "$OUT/seed_table.md"
echo
echo "== phases ($(($(date +%s) - start)) s in all)"
for l in "${phases[@]}"; do echo "$l"; done
exit $status
