# cli_nir.sh — NIR exchange end to end: export a trained run, import the graph, evaluate the imported checkpoint
# (the run's accuracy), train from it (train.init), export it again (the same config), and the refusals.
. "$(dirname "$0")/lib.sh"

data data --gzip
sf 0 train train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/data" --set train.epochs=1 --out run1
sf 0 export export run1 --nir mlp.nir
has "export says what it wrote" export.out "wrote mlp.nir"
check "the NIR file is HDF5" test "$(head -c 4 mlp.nir | tail -c 3)" = "HDF"
sf 0 import import mlp.nir --out imp.ini
has "import names the checkpoint" import.out "imp.safetensors"
check "imp.safetensors written" test -s imp.safetensors
has "the config starts from the checkpoint" imp.ini "init = imp.safetensors"
has "the config has the LIF layer" imp.ini "[lif]"

# The imported checkpoint evaluates to the run's own accuracy.
sf 0 eval_run eval run1 --data "$WORK/data" --json
sf 0 eval_imp eval imp.safetensors --data "$WORK/data" --json
acc() { "$PY" -c "import json, sys; print(json.load(open(sys.argv[1]))['test_accuracy'])" "$1"; }
check "imported accuracy $(acc eval_imp.out) = run accuracy $(acc eval_run.out)" test "$(acc eval_imp.out)" = "$(acc eval_run.out)"

# Training starts from the imported parameters: with a vanishing learning rate the accuracy stays the run's.
sf 0 train_imp train imp.ini --set train.data_dir="$WORK/data" --set train.epochs=1 --set train.lr=1e-9 --out run2
sf 0 eval_run2 eval run2 --data "$WORK/data" --json
check "train.init took effect" test "$(acc eval_run2.out)" = "$(acc eval_run.out)"

# A second trip writes the same network.
sf 0 export2 export imp.safetensors --nir again.nir --dt 1e-4
sf 0 import2 import again.nir --out again.ini
strip() { grep -v '^;' "$1" | grep -v '^init' | sed 's/ ;.*//'; }
check "the second import writes the same config" test "$(strip imp.ini)" = "$(strip again.ini)"

# Refusals: files are never replaced, layers NIR cannot express and non-NIR files are named.
sf 1 import_exists import mlp.nir --out imp.ini
has "import refuses to replace" import_exists.err "imp.ini exists"
sf 2 import_same import mlp.nir --out y.ini --checkpoint ./y.ini
has "import refuses outputs that are one file" import_same.err "--out and --checkpoint name the same file"
check "... writing nothing" test ! -e y.ini
sf 2 import_over_input import mlp.nir --out z.ini --checkpoint mlp.nir
has "import refuses to write over its input" import_over_input.err "mlp.nir is the input"
mkdir -p adir
sf 1 import_dir import mlp.nir --out adir
has "an --out that is a directory is refused" import_dir.err "adir exists (a directory)"
check "... and leaves no checkpoint behind" test ! -e adir.safetensors
cat >pool.ini <<'INI'
[train]
dataset = fashion-mnist
epochs = 1
batch = 32
timesteps = 2
[conv]
filters = 2
size = 3
[maxpool]
size = 2
[flatten]
[linear]
out = 10
INI
sf 0 train_pool train pool.ini --set train.data_dir="$WORK/data" --out run3
sf 1 export_pool export run3 --nir pool.nir
has "max-pooling is refused by layer" export_pool.err "layer 1 (maxpool2d): NIR has no max pooling"
check "nothing written on refusal" test ! -e pool.nir
sf 1 import_text import pool.ini --out x.ini
has "a non-NIR file" import_text.err "not an HDF5 file"
sf 2 export_noout export run1
has "export without --nir" export_noout.err "no --nir OUT given"
sf 2 export_baddt export run1 --nir x.nir --dt -1
has "bad --dt" export_baddt.err "expected a positive number"
sf 2 import_baddataset import mlp.nir --out y.ini --dataset imagenet
has "bad --dataset" import_baddataset.err "--dataset"
sf 1 import_wrongdataset import mlp.nir --out y.ini --dataset cifar10
has "a dataset of another shape" import_wrongdataset.err "not the chosen dataset's input shape"

finish
