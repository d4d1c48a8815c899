#!/usr/bin/env bash
# w9_w10_peers.sh — workloads W9 (SEW-ResNet-18) and W10 (Spikformer-8-384), with the CIFAR Spikformer-4-384 and
# SEW-ResNet-34/50 beside them, for spikefuse and for SpikingJelly in one call on one card: spikefuse's
# bench_w9_sew / bench_w10_spikformer in fp32 and bf16, alternating with bench/peers/sj_w9_w10.py in SpikingJelly
# 2.x's fp32, bf16 and bf16 + torch.compile modes (Triton kernels) and 0.0.0.0.14's cupy fp32 (SEW-ResNets).
# Usage: bench/gpu/w9_w10_peers.sh BIN_DIR [model ...]  (models: w9 w10 spikformer_cifar sew34 sew50; default all)
# BIN_DIR holds bench_w9_sew and bench_w10_spikformer. Environment: OUT (default ./w9-w10-out); SJ2 and SJ014, the
# site directories of SpikingJelly 2.x and 0.0.0.0.14 (pip install --no-deps --target DIR wheel; loguru beside 2.x),
# either may be missing; PYTHON (default python3, with torch and torchvision). Every program's output goes to $OUT
# and one summary line each to stdout; the peers' JSON lines to $OUT/peers.jsonl.
set -u -o pipefail
if [ $# -lt 1 ]; then
    sed -n '2,/^set -u/p' "$0" | sed '$d'
    exit 2
fi
bin=$(realpath "$1")
shift
models=${*:-w9 w10 spikformer_cifar sew34 sew50}
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-$PWD/w9-w10-out}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)," \
    "git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

ours() { # NAME PROGRAM ARGS...: spikefuse, its rows of the memory modes
    local name=$1
    shift
    timeout 150 "$@" >"$OUT/$name.txt" 2>&1
    echo "spikefuse $name rc=$?"
    grep -E "^ *(full|recompute|lean) |floor" "$OUT/$name.txt" | head -6
}
peer() { # SITE MODEL MODE IMPL: SpikingJelly from site directory SITE, its JSON line
    [ -n "$1" ] && [ -d "$1" ] || return 0
    PYTHONPATH=$1 timeout 300 "$PYTHON" bench/peers/sj_w9_w10.py "$2" "$3" --impl "$4" --json "$OUT/peers.jsonl" \
        >"$OUT/peer_$2_$3_$4.txt" 2>&1
    echo "spikingjelly $2 $3 $4 rc=$?: $(grep '^{' "$OUT/peer_$2_$3_$4.txt" | tail -1)"
    grep -m3 -E "Error|error:" "$OUT/peer_$2_$3_$4.txt"
    # SpikingJelly 2.0.0's Triton neurons refuse some 16-bit profiles, and then only its automatic choice runs
    # (its torch reference neurons, which torch.compile fuses in bf16-compile): its fastest path there
    if [ "$4" = triton ] && grep -q "Torch reference implementation required" "$OUT/peer_$2_$3_$4.txt"; then
        peer "$1" "$2" "$3" auto
    fi
}

for m in $models; do
    case $m in
    w9 | sew34 | sew50)
        depth=$([ "$m" = w9 ] && echo 18 || echo "${m#sew}")
        for p in bf16 fp32; do ours "${m}_$p" "$bin/bench_w9_sew" 10 "$p" depth="$depth" layers=0; done
        for mode in bf16-compile bf16 fp32; do peer "${SJ2:-}" "$m" "$mode" triton; done
        peer "${SJ014:-}" "$m" fp32 cupy
        ;;
    w10 | spikformer_cifar)
        variant=$([ "$m" = w10 ] && echo w10 || echo cifar)
        for p in bf16 fp32; do ours "${m}_$p" "$bin/bench_w10_spikformer" 10 "$p" "$variant"; done
        for mode in bf16-compile bf16 fp32; do peer "${SJ2:-}" "$m" "$mode" triton; done
        ;;
    *) echo "unknown model $m (w9 w10 spikformer_cifar sew34 sew50)" ;;
    esac
done
