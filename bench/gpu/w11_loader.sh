#!/usr/bin/env bash
# w11_loader.sh — workload W11 on a GPU host (docs/notebook/perf.md, W11): the image-folder loader alone (bench_imagefolder:
# RandomResizedCrop(224) + flip + normalisation into page-locked [256, 3, 224, 224] batches, THREADS threads) against
# torchvision's ImageFolder + PIL with 16 workers (peers_w9_w10.py loader) on the same JPEGs, then a W9 training run
# (SEW-ResNet-18 of examples/imagenet_sew_resnet18.ini at 224×224, T=4, batch 32, bf16, one epoch of the folder, its
# last layer cut to the folder's 12 classes) and the share of its training time the steps waited for their batch.
# Usage: bench/gpu/w11_loader.sh BIN_DIR [threads (16)]
# BIN_DIR holds spikefuse, bench_imagefolder and make_imagefolder (SF_BUNDLE_PROGS="bench_imagefolder
# make_imagefolder" tests/gpu_bundle.sh build-cuda packs them with the libraries they need). Environment: OUT
# (default ./w11-out); W11_DIR (default /tmp/w11), where make_imagefolder writes 12 classes of ImageNet-like JPEGs
# (12000 training, 1200 validation; kept for the next run); PEERS (default /work/shared/peers/peers_w9_w10.py) and
# PYTHON (default python3, with torch and torchvision) for the peer, which reads /tmp/jpegs: linked to the same
# training images when it does not exist.
set -u -o pipefail
if [ $# -lt 1 ]; then
    sed -n '2,/^set -u/p' "$0" | sed '$d'
    exit 2
fi
bin=$(realpath "$1")
threads=${2:-16}
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/w11-out}
dir=${W11_DIR:-/tmp/w11}
mkdir -p "$OUT"
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) cores"
[ -d "$dir/train" ] || "$bin/make_imagefolder" "$dir" 12000 12 1200 || exit 1

echo "== spikefuse: the loader alone, $threads threads, batch 256"
"$bin/bench_imagefolder" "$dir" "$threads" 3 256 224 cuda | tee "$OUT/w11_spikefuse.jsonl"

echo "== torchvision ImageFolder + PIL, 16 workers, batch 256 (peers_w9_w10.py loader)"
[ -e /tmp/jpegs ] || ln -s "$dir/train" /tmp/jpegs
OUT=$OUT "${PYTHON:-python3}" "${PEERS:-/work/shared/peers/peers_w9_w10.py}" loader | tee "$OUT/w11_peer.jsonl"
if [ "$(realpath /tmp/jpegs)" != "$(realpath "$dir/train")" ]; then
    echo "== spikefuse on the peer's own folder /tmp/jpegs too"
    mkdir -p "$OUT/peer_folder" && ln -sfn "$(realpath /tmp/jpegs)" "$OUT/peer_folder/train"
    "$bin/bench_imagefolder" "$OUT/peer_folder" "$threads" 3 256 224 cuda | tee "$OUT/w11_spikefuse_peer_folder.jsonl"
fi

echo "== a W9 training run fed by the loader: the steps' wait for data"
rm -rf "$OUT/train_run"
"$bin/spikefuse" train examples/imagenet_sew_resnet18.ini --device cuda --out "$OUT/train_run" \
    --set train.data_dir="$dir" --set train.classes=12 --set layer71.out=12 --set train.epochs=1 \
    --set train.precision=bf16 --set train.data_threads="$threads" --set train.log_every=50 2>&1 | tail -3
"${PYTHON:-python3}" - "$OUT/train_run/metrics.jsonl" <<'PYEOF'
import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o.get("type") == "epoch":
        print(f"epoch {o['epoch']}: {o['samples_per_s']:.0f} images/s, {o['train_seconds']:.1f} s training, "
              f"{o['data_wait_seconds']:.2f} s of it waiting for data "
              f"({100 * o['data_wait_seconds'] / o['train_seconds']:.2f}%)")
PYEOF
