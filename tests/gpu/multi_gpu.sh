#!/usr/bin/env bash
# tests/gpu/multi_gpu.sh — on one host with several GPUs: workload W5 (docs/notebook/perf.md) and the multi-GPU exactness
# checks for each G asked for, every program under mpirun with NCCL_NVLS_ENABLE=0, one process per GPU, the 1-GPU
# baselines once in the same run:
#   the NCCL all-reduce bus bandwidth (256 MiB and 1 GiB);
#   exactness at the largest G: test_dist_step with G time segments (optimizer state sharded over them), with G
#     data ranks (synchronised BN) and (G >= 4) with G/2 segments × 2 data ranks on the GPUs, every step against
#     one process alone on the whole batch and T (loss, gradients, parameters <= 1e-5, spike counts exact; sharded
#     against whole optimizer state bitwise);
#     with CURVE=1 also W5dp's loss curve over 100 steps on G GPUs against one GPU with the global batch;
#   W5dp: VGG9 with 64 samples per GPU, fp32 and bf16 (scaling efficiency t1 / tG);
#   W5time: the T=1024 Linear-LIF net split over time (speedup, peak memory per GPU against G = 1), with where each
#     rank's step time goes (waiting for the neighbours, the collectives, computing); at the largest G also with
#     the optimizer state whole on every GPU, with receives posted early, (G >= 4) time_parallel G/2 × 2 data
#     ranks (2 × 2 at G = 4), and each set of options in W5TIME_EXTRA (space-separated sets, options within a set
#     separated by commas: "bucket=4096 precision=bf16,bucket=4096");
#   W5weak: W4rec at natural activity with hidden layers of 1472·G, data parallel (samples/s per GPU against G = 1);
#   the peer, when PEER_DIR (holding peers_ddp_w3.py and peers_net.py) and PEER_SITE (a site directory with
#     SpikingJelly) are set: SpikingJelly's VGG9 under torch DDP, torchrun --nproc_per_node=1 and =G, in fp32 and
#     (but for cupy) under autocast bf16, its neuron backend PEER_BACKEND (default triton: SpikingJelly 2.0.0, whose
#     LIFNode runs its Triton kernels and takes no backend argument; cupy: 0.0.0.0.14), with a sitecustomize.py
#     that bridges what the peer script expects and the release gives (the backend argument that 2.0.0 dropped;
#     numpy.int, gone from NumPy >= 1.24, and the [T, N, C] input of a multi-step BatchNorm1d, which later releases
#     take, for 0.0.0.0.14).
# Then a summary. Usage: tests/gpu/multi_gpu.sh [G ...]  (default: every GPU the host has; e.g. 2 4). Environment:
# OUT (default ./gpu-out); SF_GPU_BIN, a directory holding mpi_w5 and test_dist_step built elsewhere
# (tests/gpu_bundle.sh; then nothing is built here, and the OpenMPI runtime packed beside it serves where the host
# has no mpirun); otherwise they are built in build-gpu. Each program gets at most LIMIT seconds (default 150).
# ONLY (an extended regular expression) runs only the programs whose run names (the summary's first column) match.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-$PWD/gpu-out}
LIMIT=${LIMIT:-150}
mkdir -p "$OUT"
LOG=$OUT/multi_gpu.log
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }
export NCCL_NVLS_ENABLE=0 # NVLink multicast can put a shared host's GPUs out of service
HOST_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
HOST_PATH=$PATH

GS=("$@")
[ ${#GS[@]} -gt 0 ] || GS=("$(nvidia-smi -L 2>/dev/null | wc -l)")
GMAX=${GS[-1]}
say "== $(date -u +%FT%TZ) G=${GS[*]}: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | sort | uniq -c | tr -s ' ')"
nvidia-smi topo -m >>"$LOG" 2>&1

if [ -n "${SF_GPU_BIN:-}" ]; then
    BIN=$SF_GPU_BIN
    export LD_LIBRARY_PATH=$BIN/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    ompi=$BIN/../ompi/usr
    # the bundle's programs link the bundle's OpenMPI (and its PMIx): a host mpirun of another build would load
    # its own plugins against those libraries
    if [ -x "$ompi/bin/mpirun" ]; then
        ompi=$(cd "$ompi" && pwd)
        export OPAL_PREFIX=$ompi PATH=$ompi/bin:$PATH
        export PMIX_INSTALL_PREFIX=$ompi/lib/x86_64-linux-gnu/pmix2
        export PMIX_MCA_mca_base_component_path=$PMIX_INSTALL_PREFIX/lib/pmix
        export LD_LIBRARY_PATH=$ompi/lib/x86_64-linux-gnu/openmpi/lib:$LD_LIBRARY_PATH
        export OMPI_MCA_mca_base_component_show_load_errors=0 # plugins for fabrics this host lacks
        say "== OpenMPI from the bundle ($ompi)"
    fi
else
    BIN=build-gpu
    if cmake -S . -B "$BIN" -DSF_CUDA=ON -DSF_WERROR=ON >>"$LOG" 2>&1 &&
        cmake --build "$BIN" -j"$(nproc)" --target mpi_w5 test_dist_step >>"$LOG" 2>&1; then
        cp "$BIN/tests/test_dist_step" "$BIN/" 2>/dev/null
        say "== built in $BIN"
    else
        say "== build failed (see $LOG)"
        tail -30 "$LOG"
        exit 1
    fi
fi
command -v mpirun >/dev/null || { say "== no mpirun here and none in the bundle"; exit 1; }
# one host: shared memory between the processes (no fabric probing; single-copy off, as in containers), no binding
# to cores (each process runs OpenMP and the loader's threads)
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader
    --mca btl_vader_single_copy_mechanism none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PATH)
[ -n "${OPAL_PREFIX:-}" ] && MPIRUN+=(-x OPAL_PREFIX -x PMIX_INSTALL_PREFIX -x PMIX_MCA_mca_base_component_path)
say "== $(mpirun --version 2>&1 | head -1)"

status=0
results=()
# keep NAME RC OUTPUT: the run's output to the log, its last lines on the console, its result line and the lines
# of where the time went kept for the summary
keep() {
    local name=$1 rc=$2 out=$3
    cat "$out" >>"$LOG"
    grep -vE '^(--|\[|$)' "$out" | tail -3
    [ "$rc" -eq 0 ] || { status=1; say "   (exit $rc)"; }
    local line
    line=$(grep -E ' [1-9][0-9]* failed' "$out" | head -1) # a rank's failed checks first
    [ -n "$line" ] || line=$(grep -E 'ms/step|bus bandwidth|passed|loss curve' "$out" | grep -v '^  ' | head -1)
    results+=("$name|$rc|$line")
    grep -E '^  (rank|waiting|timeline)' "$out" | sed "s/^/$name:/" >>"$OUT/.breakdown"
    grep -E 'samples/s per GPU' "$out" | sed "s/^/$name:/" >>"$OUT/.weak"
}
# run NAME NP PROGRAM ARGS...: the program under mpirun
run() {
    local name=$1 np=$2 prog=$3
    shift 3
    [[ $name =~ ^(${ONLY:-.*})$ ]] || return 0
    say "== mpirun -np $np $prog $*"
    timeout -k 10 "$LIMIT" "${MPIRUN[@]}" -np "$np" "$BIN/$prog" "$@" >"$OUT/.run" 2>&1
    keep "$name" $? "$OUT/.run"
}
# peer NAME NP [AMP]: SpikingJelly under torch DDP (PEER_DIR, PEER_SITE, PEER_BACKEND), with the host's libraries
peer() {
    local name=$1 np=$2 amp=${3:-} launcher=(torchrun)
    command -v torchrun >/dev/null || launcher=(python3 -m torch.distributed.run)
    say "== torchrun --nproc_per_node=$np peers_ddp_w3.py (SJ_BACKEND=$PEER_BACKEND${amp:+ SJ_AMP=$amp})"
    LD_LIBRARY_PATH=$HOST_LD_LIBRARY_PATH PATH=$HOST_PATH PYTHONPATH=$SHIM:$PEER_SITE SJ_BACKEND=$PEER_BACKEND \
        SJ_AMP=$amp timeout -k 10 "$LIMIT" "${launcher[@]}" --standalone --nproc_per_node="$np" \
        "$PEER_DIR/peers_ddp_w3.py" >"$OUT/.run" 2>&1
    keep "$name" $? "$OUT/.run"
}
# peers NP: the peer at NP processes in fp32 and (where its backend has it) bf16
peers() {
    peer "peer_fp32_$1" "$1"
    [ "$PEER_BACKEND" = cupy ] || peer "peer_bf16_$1" "$1" bfloat16
}
: >"$OUT/.breakdown"
: >"$OUT/.weak"
SHIM=
PEER_BACKEND=${PEER_BACKEND:-triton}
if [ -n "${PEER_DIR:-}" ] && [ -n "${PEER_SITE:-}" ]; then
    SHIM=$(mktemp -d)
    cat >"$SHIM/sitecustomize.py" <<'EOF'
# What peers_net.py expects of SpikingJelly and the release in PEER_SITE gives (imported by every interpreter on
# this path; the launcher's may lack torch)
import inspect
try:
    import numpy
    from spikingjelly.activation_based import functional, layer, neuron
except ImportError:
    neuron = None
if neuron is not None:
    if not hasattr(numpy, "int"):  # 0.0.0.0.14's cupy code uses numpy.int, which NumPy 1.24 removed
        numpy.int = int
    if "backend" not in inspect.signature(neuron.LIFNode.__init__).parameters:
        # 2.0.0 picks its kernels itself (Triton on CUDA) and has no backend argument
        _lif_init = neuron.LIFNode.__init__
        def _init(self, *args, backend=None, **kwargs):
            _lif_init(self, *args, **kwargs)
        neuron.LIFNode.__init__ = _init
    _bn1d = layer.BatchNorm1d.forward
    def _bn1d_forward(self, x):
        # 0.0.0.0.14 takes [T, N, C, L] only in multi-step mode; later releases also [T, N, C], as the VGG9 head gives
        if self.step_mode == "m" and x.dim() == 3:
            return functional.seq_to_ann_forward(x, super(layer.BatchNorm1d, self).forward)
        return _bn1d(self, x)
    layer.BatchNorm1d.forward = _bn1d_forward
EOF
fi

for p in fp32 bf16; do run "dp_${p}_1" 1 mpi_w5 dp "$p" 20; done
run time_1 1 mpi_w5 time 10
run weak_1 1 mpi_w5 weak 10
[ -n "$SHIM" ] && peers 1
for G in "${GS[@]}"; do
    run "busbw256_$G" "$G" mpi_w5 busbw 256
    run "busbw1g_$G" "$G" mpi_w5 busbw 1024
    if [ "$G" = "$GMAX" ]; then
        run "exact_time_$G" "$G" test_dist_step "$G" 0 cuda
        run "exact_data_$G" "$G" test_dist_step 1 1 cuda
        [ "$G" -ge 4 ] && [ $((G % 2)) -eq 0 ] && run "exact_2d_$G" "$G" test_dist_step $((G / 2)) 1 cuda
    fi
    [ "${CURVE:-0}" = 1 ] && run "curve_$G" "$G" mpi_w5 curve 100
    for p in fp32 bf16; do run "dp_${p}_$G" "$G" mpi_w5 dp "$p" 20; done
    run "time_$G" "$G" mpi_w5 time 10
    if [ "$G" = "$GMAX" ]; then
        run "time_whole_$G" "$G" mpi_w5 time 10 shard=0
        run "time_early_$G" "$G" mpi_w5 time 10 early=1
        [ "$G" -ge 4 ] && [ $((G % 2)) -eq 0 ] && run "time_2d_$G" "$G" mpi_w5 time 10 tp=$((G / 2))
        for v in ${W5TIME_EXTRA:-}; do run "time_${v//[,=]/_}_$G" "$G" mpi_w5 time 10 ${v//,/ }; done
    fi
    run "weak_$G" "$G" mpi_w5 weak 10
    [ -n "$SHIM" ] && peers "$G"
done
rm -f "$OUT/.run"
[ -n "$SHIM" ] && rm -rf "$SHIM"

# the summary: each run's line, then the ratios against G = 1 and where W5time's step time went
field() { # NAME [PATTERN]: the ms/step (or the pattern's number) of that run
    local line
    for r in "${results[@]}"; do [ "${r%%|*}" = "$1" ] && line=${r#*|*|}; done
    echo "${line:-}" | grep -oE "${2:-[0-9.]+ ms/step}" | head -1 | grep -oE '[0-9]+(\.[0-9]+)?' | head -1
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "n/a" }'; }
say ""
say "== summary (G=${GS[*]}; $(mpirun --version 2>&1 | head -1))"
for r in "${results[@]}"; do
    IFS='|' read -r name rc line <<<"$r"
    say "$(printf '%-16s rc=%-3s %s' "$name" "$rc" "$line")"
done
say ""
# scaling GET PREFIX UNIT: the runs PREFIX_1, PREFIX_G, ... against G = 1, their values from GET NAME: for times (ms)
# the efficiency t1 / tG, for rates tG / t1
scaling() {
    local v1 vg line
    v1=$($1 "${2}_1")
    line="G=1 $v1 $3"
    for G in "${GS[@]}"; do
        vg=$($1 "${2}_$G")
        if [ "$3" = ms ]; then
            line+="; G=$G $vg ms, efficiency $(ratio "$v1" "$vg")"
        else
            line+="; G=$G $vg $3 ($(ratio "$vg" "$v1") of G=1)"
        fi
    done
    echo "$line"
}
say "W5dp fp32: $(scaling field dp_fp32 ms) (targets: >= 0.97 at 2, >= 0.95 at 4)"
say "W5dp bf16: $(scaling field dp_bf16 ms) (targets: >= 0.95 at 2, >= 0.90 at 4)"
t1=$(field time_1) m1=$(field time_1 'plan [0-9]+') d1=$(field time_1 'device [0-9]+')
for name in $(for r in "${results[@]}"; do echo "${r%%|*}"; done | grep -E '^time_' | grep -v '^time_1$'); do
    tg=$(field "$name") mg=$(field "$name" 'plan [0-9]+') dg=$(field "$name" 'device [0-9]+')
    say "W5time $name: G=1 $t1 ms, $tg ms, speedup $(ratio "$t1" "$tg"); peak per GPU: plan $(ratio "$mg" "$m1") of G=1, device $(ratio "$dg" "$d1") (targets: 1.8x and 0.55 at 2, 3.2x and 0.30 at 4)"
done
grep -E '^time_' "$OUT/.breakdown" | tee -a "$LOG"
per_gpu() { grep "^${1}:" "$OUT/.weak" | grep -oE '[0-9.]+ samples/s' | grep -oE '[0-9.]+' | head -1; }
say "W5weak (W4rec natural, hidden 1472·G, data parallel): $(scaling per_gpu weak 'samples/s per GPU') (targets: >= 0.90 at 2, >= 0.80 at 4)"
tee -a "$LOG" <"$OUT/.weak"
for p in fp32 bf16; do
    [ -n "$(field "peer_${p}_1")" ] &&
        say "peer SpikingJelly ($PEER_BACKEND) under torch DDP, W5dp $p: $(scaling field "peer_$p" ms)"
done
rm -f "$OUT/.breakdown" "$OUT/.weak"
exit $status
