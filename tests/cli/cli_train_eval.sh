# cli_train_eval.sh — the happy paths: train on tiny synthetic data until it learns, the run directory's files,
# eval of the checkpoints, bench, PyTorch-side loading of the checkpoint, and refusing to reuse a run directory.
. "$(dirname "$0")/lib.sh"

data data --gzip
sf 0 train train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/data" --out run1
has "final accuracy on stdout" train.out "final test accuracy"
for f in config.ini metrics.jsonl last.safetensors best.safetensors; do
    check "run1/$f exists" test -s "run1/$f"
done
check "no temporaries left" test -z "$(ls run1 | grep tmp)"
check "one progress line per epoch when stderr is not a terminal" test "$(grep -c '^epoch [0-9]*/2: train loss' train.err)" -eq 2
check "no terminal control codes when not a terminal" test "$(grep -c $'\r' train.err)" -eq 0
has "epoch line shows test accuracy" train.err "test acc"
has "epoch line shows firing rates" train.err "firing"
check "2 epoch lines in metrics.jsonl" test "$(json_field run1/metrics.jsonl epoch test_accuracy | wc -l)" -eq 2
# 512 samples / batch 32 = 16 steps per epoch, log_every = 1.
check "32 step lines in metrics.jsonl" test "$(json_field run1/metrics.jsonl step loss | wc -l)" -eq 32
best=$(json_field run1/metrics.jsonl epoch test_accuracy | sort -g | tail -1)
check "the tiny net learns the synthetic classes (best test accuracy $best >= 0.9)" \
    "$PY" -c "import sys; sys.exit(0 if $best >= 0.9 else 1)"
rates=$(json_field run1/metrics.jsonl epoch firing_rates | tail -1)
check "one firing rate per LIF layer, within [0, 1] ($rates)" \
    "$PY" -c "r = $rates; import sys; sys.exit(0 if len(r) == 1 and 0 <= r[0] <= 1 else 1)"
has "resolved config keeps the override" run1/config.ini "$WORK/data"

# eval: a file, a run directory (its best), JSON output; the accuracy is the run's best.
sf 0 eval eval run1/best.safetensors
has "eval prints accuracy" eval.out "test accuracy:"
has "eval prints firing rates" eval.out "lif"
sf 0 eval_json eval run1 --json
check "eval of the best checkpoint reproduces the run's best accuracy" "$PY" -c "
import json, sys; o = json.load(open('eval_json.out')); sys.exit(0 if repr(o['test_accuracy']) == '$best' else 1)"
sf 0 eval_batch eval run1/last.safetensors --batch 7 --json
sf 1 eval_nodata eval run1/best.safetensors --data "$WORK/nowhere"
has "missing data names the path" eval_nodata.err "$WORK/nowhere"

# The checkpoint loads in PyTorch with its parameters, buffers and metadata.
check "checkpoint loads with safetensors/torch" "$PY" "$HERE/st_check.py" run1/last.safetensors
"$PY" "$HERE/st_check.py" run1/last.safetensors >st.out 2>&1
has "metadata has the config" st.out "config"
has "metadata has the net state" st.out "rng_counter"
has "metadata has the loader state" st.out "loader_state"

# 16-bit precisions need a GPU: on the CPU the run fails saying so.
for p in bf16 fp16; do
    sf 1 cpu_$p train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/data" --set train.precision=$p --device cpu \
        --out cpu_$p
    has "$p on the CPU explains itself" cpu_$p.err "precision $p is a CUDA option: the CPU backend computes in fp32 only"
done

# A run directory is never reused: the run's files stay as they were (the lock file records who last held it).
sum_before=$(cat run1/*.safetensors run1/*.ini run1/*.jsonl | md5sum)
sf 1 reuse train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/data" --out run1
has "refusal explains itself" reuse.err "run1 holds a run: refusing to write a new run over it"
check "files untouched after the refusal" test "$(cat run1/*.safetensors run1/*.ini run1/*.jsonl | md5sum)" = "$sum_before"

# Default run directory name, plain (not gzipped) IDX files, the resolved config trains again.
data plain
sf 0 train_default train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/plain" --set train.epochs=1
check "default run directory runs/tiny_mlp-<date>-<time>" test -s "$(ls -d runs/tiny_mlp-*)/last.safetensors"
sf 0 train_resolved train run1/config.ini --set train.epochs=1 --out run2

# bench on the data set and on synthetic input, text and JSON.
sf 0 bench bench "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/data" --steps 3 --warmup 1
has "bench: throughput" bench.out "samples/s"
has "bench: phases" bench.out "backward"
has "bench: per layer" bench.out "per layer"
has "bench: memory plan" bench.out "memory plan"
sf 0 bench_json bench "$HERE/tiny_mlp.ini" --synthetic --steps 2 --json
check "bench --json has the figures" "$PY" -c "
import json, sys; o = json.load(open('bench_json.out'))
sys.exit(0 if o['samples_per_s'] > 0 and o['memory_plan']['total'] > 0 and len(o['layers']) == 5 else 1)"

finish
