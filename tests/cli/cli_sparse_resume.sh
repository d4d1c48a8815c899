# cli_sparse_resume.sh — sparse = auto (the default): a checkpoint records every auto layer's crossovers and last
# densities, so a run continued from it chooses the paths the uninterrupted continuation chose and matches it
# bitwise (the two compared runs fork from one checkpoint); the run directory's choices file records the crossovers
# and a resume takes those written there (a convolution choice, which the CPU never makes, is refused by line); an
# evaluation of the checkpoint reproduces the run's test accuracy; deterministic = on makes two fresh runs bitwise
# alike, at the fixed crossover 1/8 (the CPU's in every mode).
. "$(dirname "$0")/lib.sh"

data data
cat >net.ini <<INI
[train]
dataset = fashion-mnist
data_dir = $WORK/data
epochs = 1
batch = 32
timesteps = 4
encoding = latency
optimizer = adam
lr = 0.005
seed = 3
log_every = 1
[neuron]
tau = 2
[flatten]
[linear]
out = 32
[lif]
[linear]
out = 10
INI

# sparse_state NAME FILE: the checkpoint's __metadata__ 'sparse_state' into NAME.state
sparse_state() {
    "$PY" - "$2" >"$1.state" <<'PYEOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    print(json.loads(f.read(n))["__metadata__"].get("sparse_state", "none"))
PYEOF
}

sf 0 x train net.ini --out X
sparse_state x X/last.safetensors
# "cpu fp32 2" then per layer: index, crossovers, densities — both linear layers (1 and 3) read spikes: the latency
# input and the LIF's
check "the checkpoint records both auto layers' crossovers: $(cat x.state)" \
    "$PY" -c "import sys; t = open('x.state').read().split(); sys.exit(0 if t[:3] == ['cpu', 'fp32', '2'] and
[t[3], t[8]] == ['1', '3'] and all(0 <= float(v) <= 0.5 for v in t[4:6] + t[9:11]) else 1)"

sf 0 y train --resume X --set train.epochs=3 --out Y
sf 0 z1 train --resume X --set train.epochs=2 --out Z
sf 0 z2 train --resume Z --set train.epochs=3
json_field Y/metrics.jsonl step loss >y.loss
json_field Z/metrics.jsonl step loss >z.loss
check "two epochs of step losses logged" test "$(wc -l <y.loss)" -eq 32
check "per-step losses bitwise identical after a resumption" cmp -s y.loss z.loss
check "final tensors bitwise identical after a resumption" "$PY" "$HERE/st_check.py" --same Y/last.safetensors Z/last.safetensors
sparse_state y Y/last.safetensors
sparse_state z Z/last.safetensors
check "the crossovers recorded by the first run carry on" \
    "$PY" -c "import sys; a, b, c = (open(f).read().split() for f in ('x.state', 'y.state', 'z.state'));
sys.exit(0 if a[4:6] == b[4:6] == c[4:6] and a[9:11] == b[9:11] == c[9:11] and b == c else 1)"

# the run directory's choices file records them when the run starts, and a resume gives them back to the network:
# a crossover written there is the one the continued run uses (and records in its checkpoint)
check "the run directory records the crossovers" \
    "$PY" -c "import sys; t = open('x.state').read().split(); c = open('X/choices').read();
sys.exit(0 if 'sparse 1 %s %s' % (t[4], t[5]) in c and 'sparse 3 %s %s' % (t[9], t[10]) in c else 1)"
cp -r X W
sed -i 's/^sparse 3 .*/sparse 3 0.375 0.25/' W/choices
sf 0 w train --resume W --set train.epochs=2
sparse_state w W/last.safetensors
check "a resume takes the crossovers of the run's choices: $(cat w.state)" \
    "$PY" -c "import sys; t = open('w.state').read().split(); sys.exit(0 if t[9:11] == ['0.375', '0.25'] else 1)"
sed -i 's/^sparse 3 .*/sparse 2 0.375 0.25/' W/choices
sf 1 w_bad train --resume W --set train.epochs=3
has "a choices file that does not fit the network is refused, naming the line" w_bad.err "W/choices: line 5: layer 2 does not choose its path"
# a convolution choice (a GPU's) in a CPU run's record: the CPU times none, and says so before it compiles
cp -r X V
echo "conv 128 1 28 28 8 3 1 1 28 28 0 0 0 0 0 1 3 128 0 1 3 128 0 1 3 128" >>V/choices
sf 1 v_bad train --resume V --set train.epochs=2
has "a convolution choice in a CPU run's choices is refused, naming the line" v_bad.err \
    "V/choices: line 6: set conv choice: the cpu backend times no convolution choices"

sf 0 eval eval Y --json
check "eval of the best checkpoint reproduces the run's test accuracy" "$PY" - eval.out Y/metrics.jsonl <<'PYEOF'
import json, sys
got = json.load(open(sys.argv[1]))
best = [o for o in map(json.loads, open(sys.argv[2])) if o["type"] == "epoch" and o["best"]][-1]
sys.exit(0 if got["test_accuracy"] == best["test_accuracy"] else 1)
PYEOF

sf 0 d1 train net.ini --set train.deterministic=on --out D1
sf 0 d2 train net.ini --set train.deterministic=on --out D2
json_field D1/metrics.jsonl step loss >d1.loss
json_field D2/metrics.jsonl step loss >d2.loss
check "deterministic: two fresh runs bitwise alike" cmp -s d1.loss d2.loss
sparse_state d D1/last.safetensors
check "deterministic: the fixed crossover 1/8, not measured: $(cat d.state)" \
    "$PY" -c "import sys; t = open('d.state').read().split(); sys.exit(0 if t[4:6] == t[9:11] == ['0.125', '0.125'] else 1)"
finish
