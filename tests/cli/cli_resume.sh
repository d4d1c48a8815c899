# cli_resume.sh — --resume continues a run bitwise: 2 epochs in one go and 1 epoch + resume give identical
# per-step losses, test accuracies and final tensors; so does a run stopped by SIGINT in the middle of an epoch, and
# one with Poisson encoding (whose test passes draw spikes too). A resumed run may not change what it computes. A run
# trained on a GPU (its checkpoint says device = cuda:0) evaluates and continues on the CPU.
. "$(dirname "$0")/lib.sh"

data data
common=(--set train.data_dir="$WORK/data")
sf 0 a train "$HERE/tiny_mlp.ini" "${common[@]}" --set train.epochs=2 --out A
sf 0 b1 train "$HERE/tiny_mlp.ini" "${common[@]}" --set train.epochs=1 --out B
sf 0 b2 train --resume B --set train.epochs=2
has "resume says where it continues" b2.err "resuming at epoch 2"
json_field A/metrics.jsonl step loss >a.loss
json_field B/metrics.jsonl step loss >b.loss
check "32 step losses logged" test "$(wc -l <a.loss)" -eq 32
check "per-step losses bitwise identical after resume" cmp -s a.loss b.loss
json_field A/metrics.jsonl epoch test_accuracy >a.acc
json_field B/metrics.jsonl epoch test_accuracy >b.acc
check "test accuracies identical after resume" cmp -s a.acc b.acc
check "final tensors bitwise identical after resume" "$PY" "$HERE/st_check.py" --same A/last.safetensors B/last.safetensors

sf 0 done train --resume ./B/ --set train.epochs=2
has "resuming a finished run says so" done.out "nothing to do"
sf 3 changed train --resume B --set train.lr=0.1
has "a changed setting is refused and named" changed.err "lr"
sf 0 same_config train "$HERE/tiny_mlp.ini" "${common[@]}" --set train.epochs=2 --resume B
sf 3 other_config train "$HERE/tiny_mlp.ini" "${common[@]}" --set train.epochs=2 --set train.seed=4 --resume B
has "another config is refused" other_config.err "seed"
sf 0 fork train --resume B --set train.epochs=3 --out C
check "a fork to a new directory leaves the old run alone" test "$(json_field B/metrics.jsonl epoch epoch | wc -l)" -eq 2

# An edited config.ini is not silently rewritten: an edit to another run is refused, saying where the run's config
# lives and how to train with the edit; one in a setting resume may change is a warning; comments are kept.
cp B/config.ini saved.ini
sed -i 's/^lr = .*/lr = 0.1/' B/config.ini
cp B/config.ini edited.ini
sf 3 edited train --resume B --set train.epochs=2
has "the edit is named" edited.err "B/config.ini was edited: it has 'lr = 0.1' where the run has 'lr = 0.005'"
has "the message says where the run's config lives" edited.err "B/last.safetensors"
has "... and how to train with the edit" edited.err "spikefuse train B/config.ini --set train.init=B/last.safetensors"
check "the edited config.ini is kept" cmp -s B/config.ini edited.ini
sed 's/^epochs = .*/epochs = 9/' saved.ini >B/config.ini
sf 0 epochs_edited train --resume B
has "an edit of a changeable setting is a warning" epochs_edited.err "warning: B/config.ini has 'epochs = 9' where the run has 'epochs = 2'"
has "... naming --set" epochs_edited.err "change such a setting with --set"
{ echo "; my notes on this run"; cat saved.ini; } >B/config.ini
sf 0 commented train --resume B
check "no warning for comments" test "$(grep -c warning commented.err)" -eq 0
has "a config.ini that says the same keeps the user's comments" B/config.ini "; my notes on this run"

# SIGINT in the middle of an epoch: last.safetensors records the position, --resume goes on bitwise.
data big --train 2500
big=(--set train.data_dir="$WORK/big" --set train.epochs=2)
sf 0 d train "$HERE/tiny_mlp.ini" "${big[@]}" --out D
stop_after e1 E 20 train "$HERE/tiny_mlp.ini" "${big[@]}" --out E
if [ "$rc" -eq 130 ]; then
    ok
    has "interrupt tells how to continue" e1.err "--resume E"
    sf 0 e2 train --resume E
    json_field D/metrics.jsonl step loss >d.loss
    json_field E/metrics.jsonl step loss >e.loss
    check "per-step losses identical after an interrupted epoch" cmp -s d.loss e.loss
    json_field D/metrics.jsonl epoch train_loss >d.tl
    json_field E/metrics.jsonl epoch train_loss >e.tl
    check "epoch train losses identical after an interrupted epoch" cmp -s d.tl e.tl
    check "final tensors identical after an interrupted epoch" "$PY" "$HERE/st_check.py" --same D/last.safetensors E/last.safetensors
else
    bad "SIGINT: expected exit 130, got $rc: $(tail -c 300 e1.err)"
fi

# Poisson encoding: every random stream continues, the test pass's included, so test accuracies, firing rates and
# the choice of the best checkpoint are those of the uninterrupted run; eval of a checkpoint reproduces them.
# The first linear layer reads the spikes (sparse = auto); PA and PB are separate fresh runs, which would measure
# their crossovers separately: a fixed one makes them choose alike (cli_sparse_resume.sh tests measured ones).
P=("${common[@]}" --set train.encoding=poisson --set train.lr=0.0005 --set train.timesteps=4
   --set train.sparse_crossover=0.25)
sf 0 pa train "$HERE/tiny_mlp.ini" "${P[@]}" --set train.epochs=3 --out PA
sf 0 pb1 train "$HERE/tiny_mlp.ini" "${P[@]}" --set train.epochs=1 --out PB
sf 0 pb2 train --resume PB --set train.epochs=2
sf 0 pb3 train --resume PB --set train.epochs=3
for field in test_accuracy firing_rates best; do
    json_field PA/metrics.jsonl epoch $field >pa.$field
    json_field PB/metrics.jsonl epoch $field >pb.$field
    check "Poisson: $field identical after two resumes" cmp -s pa.$field pb.$field
done
check "Poisson: final tensors identical after two resumes" "$PY" "$HERE/st_check.py" --same PA/last.safetensors PB/last.safetensors
sf 0 pa_eval eval PA --json
"$PY" - pa_eval.out PA/metrics.jsonl <<'PYEOF' || bad "eval of the best checkpoint does not reproduce the run's test pass"
import json, sys
got = json.load(open(sys.argv[1]))
best = [o for o in map(json.loads, open(sys.argv[2])) if o["type"] == "epoch" and o["best"]][-1]
rates = [r["rate"] for r in got["firing_rates"]]
sys.exit(0 if got["test_accuracy"] == best["test_accuracy"] and rates == best["firing_rates"] else 1)
PYEOF

# Across devices: a checkpoint is the same on every device. A GPU run's checkpoint differs from a CPU run's only in
# its config's device, so this one stands in for it: on a machine without a usable GPU it needs --device cpu, and
# with it evaluates and continues as the CPU run it is.
cp -r B G
"$PY" "$HERE/st_check.py" --edit-meta G/last.safetensors config "device = cpu" "device = cuda:0"
"$PY" "$HERE/st_check.py" --edit-meta G/best.safetensors config "device = cpu" "device = cuda:0"
sf 1 gpu_eval_here eval G
has "without a GPU the message says what to do" gpu_eval_here.err "use device cpu"
sf 0 gpu_eval_cpu eval G --device cpu --json
sf 0 cpu_eval eval B --json
"$PY" - gpu_eval_cpu.out cpu_eval.out <<'PYEOF' || bad "the GPU-labelled checkpoint evaluates differently on the CPU"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sys.exit(0 if a["test_accuracy"] == b["test_accuracy"] and a["firing_rates"] == b["firing_rates"] else 1)
PYEOF
sf 1 gpu_resume_here train --resume G --set train.epochs=3
sf 0 gpu_resume_cpu train --resume G --device cpu --set train.epochs=3
check "continued on the CPU: the CPU run's tensors" "$PY" "$HERE/st_check.py" --same G/last.safetensors C/last.safetensors
has "the continued run's config says where it runs now" G/config.ini "device = cpu"

finish
