#!/usr/bin/env bash
# tests/gpu.sh — on a machine with an NVIDIA GPU: build the CUDA backend, run the GPU tests (tests/gpu/) and the
# GPU benchmarks (bench/gpu/), log everything to $OUT/gpu.log and print a summary table last.
# Usage: tests/gpu.sh [--tests-only | --bench-only]. Environment: OUT (default ./gpu-out), SF_GPU_BIN (a directory
# of programs built elsewhere by tests/gpu_bundle.sh, for a machine that cannot configure the build, e.g. one
# without the -dev packages; its libraries go on LD_LIBRARY_PATH).
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
LOG=$OUT/gpu.log
MODE=${1:-all}
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }

say "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
say "== git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

BIN=build-gpu
progs=$(ls tests/gpu/*.c bench/gpu/*.c | xargs -n1 basename | sed 's/\.c$//')
progs="$progs bench_events" # the data loader's side of the event examples (below)
# the command line tool for the event examples' GPU step, where cairo (its figures) is installed
cli=OFF
pkg-config --exists cairo 2>/dev/null && cli=ON && progs="$progs spikefuse_cli"
if [ -n "${SF_GPU_BIN:-}" ] && [ -d "$SF_GPU_BIN" ]; then
    say "== using the programs in $SF_GPU_BIN (tests/gpu_bundle.sh)"
    BIN=$SF_GPU_BIN
elif cmake -S . -B "$BIN" -DSF_CUDA=ON -DSF_TESTS=OFF -DSF_CLI=$cli -DSF_WERROR=ON >>"$LOG" 2>&1 &&
    cmake --build "$BIN" -j"$(nproc)" --target $progs >>"$LOG" 2>&1; then
    say "== built in $BIN"
else
    say "== build failed (see $LOG)"
    tail -30 "$LOG"
    exit 1
fi

summary=()
status=0
run() { # name, what of its output goes into the summary: "last" (its last line) or "table" (up to "per-layer"),
    # then the program's arguments
    local name=$1 what=$2
    shift 2
    [ -x "$BIN/$name" ] || return 0
    say "== $name $*"
    local t0=$(date +%s%N)
    "$BIN/$name" "$@" >"$OUT/.run" 2>&1
    local rc=$?
    cat "$OUT/.run" >>"$LOG"
    cat "$OUT/.run"
    local ms=$((($(date +%s%N) - t0) / 1000000))
    summary+=("$(printf '%-24s rc=%-3s %7d ms' "$name $*" "$rc" "$ms")")
    if [ "$what" = last ]; then
        summary+=("    $(tail -1 "$OUT/.run")")
    else
        while IFS= read -r l; do summary+=("    $l"); done < <(sed '/^per-layer/,$d' "$OUT/.run")
    fi
    [ $rc -eq 0 ] || status=1
}

if [ "$MODE" != --bench-only ]; then
    for t in $(ls tests/gpu/test_*.c 2>/dev/null | xargs -n1 basename | sed 's/\.c$//'); do run "$t" last; done
fi
if [ "$MODE" != --tests-only ]; then
    for b in $(ls bench/gpu/bench_*.c 2>/dev/null | xargs -n1 basename | sed 's/\.c$//'); do run "$b" table; done
    # the opt-in precisions (sf_net_params.precision, [train] precision): TF32 arithmetic, 16-bit activations
    for p in bf16 fp16; do run bench_w1_lif table 0 $p; done
    for p in tf32 bf16 fp16; do run bench_w2_linear_lif table $p; done
    for p in tf32 bf16 fp16; do run bench_w3_vgg9 table 10 $p; done
    run bench_w4 table all 64 bf16 # event-driven layers (linear, recurrent) on 16-bit activations
    # W10: Spikformer-8-384 at 224² in bf16, and the CIFAR Spikformer-4-384 step in both
    run bench_w10_spikformer table 10 bf16
    for p in fp32 bf16; do run bench_w10_spikformer table 10 $p cifar; done
    # W9: SEW-ResNet-18 in bf16 (fp32 ran above), SEW-ResNet-34 and -50 in both, without their per-layer tables
    run bench_w9_sew table 10 bf16
    for d in 34 50; do for p in fp32 bf16; do run bench_w9_sew table 10 $p depth=$d layers=0; done; done
    # another workspace allowance for cuDNN's convolution algorithms (default 512 MiB): speed against peak memory
    run bench_w3_vgg9 table 10 fp32 conv_workspace_mib=${SF_GPU_WS_MIB:-256}
    run bench_w3_vgg9 table 10 bf16 conv_workspace_mib=128
    # the step without its CUDA graph (bench_mlp_step measures both itself)
    run bench_w3_vgg9 table 10 fp32 graph=0
    # event datasets: one loader's samples/s on this host's CPU against the GPU step of each event example
    run bench_events table 20
    for c in shd_ff nmnist_csnn dvsgesture_csnn; do
        run spikefuse table bench examples/$c.ini --synthetic --device cuda --steps 20
    done
    # deterministic algorithms and reductions only ([train] deterministic): the cost against the first W3 line
    run bench_w3_vgg9 table 10 fp32 deterministic=1
fi
rm -f "$OUT/.run"
say ""
say "== summary"
for l in "${summary[@]}"; do say "$l"; done
exit $status
