# cli_plot.sh — `spikefuse plot` and `train --report` on a real tiny run: every figure a PNG of 800x450 that is not
# blank and an SVG that parses, the report page with the run's numbers, and the bad inputs: a run without
# checkpoints or metrics, a metrics line cut mid-write, a sample index out of range, a directory that is no run.
. "$(dirname "$0")/lib.sh"

# png_ok NAME FILE: FILE is an 800x450 PNG with some of it drawn (2% to 70%) in more than 20 colours.
png_ok() {
    local stats
    stats=$("$SF_PNG_STATS" "$2") || { bad "$1: $2 is not a readable PNG"; return; }
    if "$PY" -c "w, h, ink, n = '$stats'.split(); import sys; sys.exit(0 if (w, h) == ('800', '450') and 0.02 < float(ink) < 0.7 and int(n) > 20 else 1)"; then
        ok
    else
        bad "$1: $2: width height inked colours = $stats"
    fi
}

# svg_ok NAME FILE: FILE parses as XML, its root is an 800x450 px svg element.
svg_ok() {
    if "$PY" -c "
import sys, xml.etree.ElementTree as ET
r = ET.parse('$2').getroot()
sys.exit(0 if r.tag.endswith('svg') and r.get('width') == '800px' and r.get('height') == '450px' else 1)"; then
        ok
    else
        bad "$1: $2 is not an 800x450 SVG document"
    fi
}

data data --gzip
sf 0 train train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/data" --out run1 --report
check "train --report wrote the page" test -s run1/report.html
has "the page has the run's final test accuracy" run1/report.html \
    "$("$PY" -c "import json; print('%.2f%%' % (100 * [json.loads(l) for l in open('run1/metrics.jsonl') if '\"epoch\"' in l and '\"test_accuracy\"' in l][-1]['test_accuracy']))")"
has "the page shows the config" run1/report.html "$WORK/data"
check "the page of a finished run does not reload" test "$(grep -c 'http-equiv="refresh"' run1/report.html)" -eq 0
check "the page holds every figure inline" test "$(grep -c '<svg' run1/report.html)" -eq 8

sf 0 plot plot run1
figures="loss accuracy learning_rate firing_rates sample_input sample_spikes_layer2 sample_membrane_layer2 sample_output"
for f in $figures; do
    png_ok "plot" "run1/plots/$f.png"
    svg_ok "plot" "run1/plots/$f.svg"
done
has "plot says where the figures are" plot.out "8 figures"
check "no note for a complete run" test ! -s plot.err

# --out: the figures and the page go there, and nothing into the run directory (which may be read-only)
find run1 -printf '%p %s %T@\n' | sort >run1.before
sf 0 plot_out plot run1 --out elsewhere --sample 199
png_ok "--out" elsewhere/sample_spikes_layer2.png
has "the page goes beside the figures" elsewhere/report.html "Test sample 199"
has "plot names it" plot_out.out "elsewhere/report.html"
find run1 -printf '%p %s %T@\n' | sort >run1.after
check "plot --out writes nothing into the run directory" cmp -s run1.before run1.after
if [ "$(id -u)" != 0 ]; then
    cp -r run1 readonly && chmod -R a-w readonly
    sf 0 plot_readonly plot readonly --out ro_figures
    check "a read-only run plots with --out" test -s ro_figures/report.html
    chmod -R u+w readonly
fi

# a convolutional net with Poisson input: conv -> BN -> LIF (fused) -> max-pool, a spiking hidden layer; every LIF
# layer gets its figures, the input is a spike raster
cat >conv.ini <<INI
[train]
dataset = fashion-mnist
data_dir = $WORK/data
epochs = 1
batch = 32
timesteps = 3
encoding = poisson
optimizer = adam
lr = 0.005
log_every = 4
[conv]
filters = 4
size = 3
pad = 1
bias = off
[bn]
[lif]
[maxpool]
size = 2
[flatten]
[linear]
out = 24
[lif]
[linear]
out = 10
INI
sf 0 train_conv train conv.ini --out conv
sf 0 plot_conv plot conv --sample 3
for f in firing_rates sample_input sample_spikes_layer2 sample_membrane_layer2 sample_spikes_layer6 sample_membrane_layer6; do
    png_ok "conv" "conv/plots/$f.png"
done
check "a large layer's raster says which neurons it shows" grep -qE \
    "layer 2 \(LIF\) for test sample 3: (64 of the [0-9]+ neurons that spike \(of 3136\), evenly spaced|the [0-9]+ of 3136 neurons that spike|none of the 3136 neurons spikes)" conv/report.html
has "the input of a Poisson encoding is named" conv/report.html "Poisson encoding"

# bad input
sf 2 sample_range plot run1 --sample 200
has "an index past the test set names the range" sample_range.err "200 samples (0 to 199)"
sf 2 sample_negative plot run1 --sample -1
sf 2 no_run plot
sf 2 extra plot run1 run1
sf 2 unknown_option plot run1 --smaple 3
sf 1 missing plot "$WORK/nowhere"
has "a missing directory is named" missing.err "$WORK/nowhere"
mkdir -p empty
sf 1 empty plot empty
has "an empty directory is no run" empty.err "not a spikefuse run directory"

# a run in progress: plot while the trainer (with --report) still appends to metrics.jsonl, then stop it with Ctrl-C
"$SF" train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/data" --set train.epochs=400 --out live --report \
    >live.out 2>live.err &
pid=$!
for _ in $(seq 600); do grep -q '"type":"epoch"' live/metrics.jsonl 2>/dev/null && break; sleep 0.1; done
sf 0 plot_live plot live
png_ok "plot of a live run" live/plots/accuracy.png
png_ok "plot of a live run" live/plots/sample_spikes_layer2.png
# the trainer's next epoch rewrites the page as a live one
for _ in $(seq 300); do grep -q 'http-equiv="refresh"' live/report.html && break; sleep 0.1; done
has "the page of a run in training reloads itself" live/report.html 'http-equiv="refresh"'
has "the page says training goes on" live/report.html "Training: "
kill -INT $pid
wait $pid
rc=$?
check "the trainer stopped on Ctrl-C (exit $rc, expected 130)" test $rc -eq 130

# metrics lines with counts no run has (an epoch of 1e19 sent the axes into an endless loop) and values past any
# range: drawn or left out, promptly
mkdir -p huge
cp run1/config.ini huge/
cat >huge/metrics.jsonl <<'JSONL'
{"type":"step","epoch":1e19,"step":1e19,"loss":1e300,"accuracy":0.5,"lr":1e-300}
{"type":"step","epoch":1,"step":2,"loss":-1e308,"accuracy":1e19,"lr":0.01}
{"type":"epoch","epoch":1e19,"step":1e19,"train_loss":1e308,"train_accuracy":0.5,"test_accuracy":-1e300,"firing_rates":[1e19,-1e-320],"lr":1e19,"best":true}
{"type":"epoch","epoch":2.5,"step":-3,"train_loss":0.1,"train_accuracy":0.5,"test_accuracy":0.5,"firing_rates":[0.5],"lr":0.01}
JSONL
timeout 60 "$SF" plot huge >huge.out 2>huge.err
rc=$?
check "plot of absurd metrics ends within 60 s and succeeds (exit $rc: $(head -c 300 huge.err))" test $rc -eq 0
png_ok "absurd metrics" huge/plots/loss.png

# a run whose first epoch is still going: metrics only, the last line cut mid-write
mkdir -p young
cp run1/config.ini young/
head -n 5 run1/metrics.jsonl >young/metrics.jsonl
head -c 40 <(sed -n 6p run1/metrics.jsonl) >>young/metrics.jsonl
sf 0 young plot young
has "no checkpoint is noted" young.err "no checkpoint yet"
has "the cut line is noted with its number" young.err "metrics.jsonl:6: the last line has no end"
png_ok "young" young/plots/loss.png
check "no sample figures without a checkpoint" test ! -e young/plots/sample_input.png
has "the page says what is missing" young/report.html "no checkpoint yet"

# only last.safetensors (the run was stopped in its first epoch): the sample comes from it
mkdir -p stopped
cp run1/config.ini run1/last.safetensors stopped/
sf 0 stopped plot stopped
has "no metrics is noted" stopped.err "no metrics.jsonl"
has "the sample's checkpoint is named" stopped.err "last.safetensors"
png_ok "stopped" stopped/plots/sample_membrane_layer2.png

# the test set is gone: the curves still come, the note says why there is no sample
mkdir -p moved
cp run1/* moved/ 2>/dev/null
sed -i "s#$WORK/data#$WORK/gone#" moved/config.ini
sf 0 moved plot moved
has "a missing data set is noted with its path" moved.err "$WORK/gone"
png_ok "moved" moved/plots/accuracy.png

finish
