# cli_transformers.sh — the spiking transformer examples (examples/cifar10_spikformer.ini, imagenet_spikformer.ini,
# cifar10_sdt.ini) train with `spikefuse train` as written, shrunk by overrides only to what CI's CPU does in seconds:
# synthetic 3x32x32 input (the ImageNet net's /16 stem then makes 2x2 tokens), 8 samples in batches of 4, T = 2,
# one epoch. Each run ends, logs a finite loss at every step and writes its checkpoint.
. "$(dirname "$0")/lib.sh"

EXAMPLES="$HERE/../../examples"
for net in cifar10_spikformer imagenet_spikformer cifar10_sdt; do
    sf 0 "$net" train "$EXAMPLES/$net.ini" --set train.dataset=synthetic --set "train.input_shape=3,32,32" \
        --set train.samples=8 --set train.batch=4 --set train.epochs=1 --set train.timesteps=2 \
        --set train.log_every=1 --out "run_$net"
    check "$net: its checkpoint" test -s "run_$net/last.safetensors"
    losses=$(json_field "run_$net/metrics.jsonl" step loss | tr '\n' ' ')
    check "$net: a finite loss at each of its 2 steps ($losses)" "$PY" -c "
import math, sys; l = [float(v) for v in '$losses'.split()]; sys.exit(0 if len(l) == 2 and all(map(math.isfinite, l)) else 1)"
done

finish
