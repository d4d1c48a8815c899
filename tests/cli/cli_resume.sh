# cli_resume.sh — --resume continues a run bitwise: 2 epochs in one go and 1 epoch + resume give identical
# per-step losses, test accuracies and final tensors; so does a run stopped by SIGINT in the middle of an epoch.
# A resumed run may not change what it computes.
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

# SIGINT in the middle of an epoch: last.safetensors records the position, --resume goes on bitwise.
data big --train 2500
big=(--set train.data_dir="$WORK/big" --set train.epochs=2)
sf 0 d train "$HERE/tiny_mlp.ini" "${big[@]}" --out D
"$SF" train "$HERE/tiny_mlp.ini" "${big[@]}" --out E >e1.out 2>e1.err &
pid=$!
for _ in $(seq 1 500); do
    [ -s E/metrics.jsonl ] && [ "$(wc -l <E/metrics.jsonl)" -ge 20 ] && break
    sleep 0.01
done
kill -INT "$pid"
wait "$pid"
rc=$?
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

finish
