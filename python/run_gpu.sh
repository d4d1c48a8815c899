#!/usr/bin/env bash
# run_gpu.sh — on a GPU machine without network, from a copy of the repository: installs the package from this
# checkout (no build isolation: scikit-build-core, cmake, ninja and torch must be there), runs the Python tests
# (CUDA cases, custom ops, torch.compile, torch.export, autocast), the DDP check on 2 ranks (torchrun, eager,
# compiled and as one Network; a GPU per rank where the host has 2, else both on one through gloo), and the
# benchmarks: W1 (bench_w1.py) and W3 (bench_w3.py, VGG9 with BNLIF), once per SpikingJelly version, and W12
# (bench_w12.py: W3 through a Network; beside bench_w3_vgg9 where SF_BENCH_W3 names that program). Logs go to $OUT
# (default /tmp).
# Usage: python/run_gpu.sh [tests] [ddp] [w1] [w3] [w12] — the stages to run (default: all). The library is built in
# build-python/ (kept between calls, so a later call with other stages reinstalls without rebuilding).
# SPIKEFUSE_WHEELS: optional folders of peer wheels, separated by ':' (e.g. SpikingJelly 2.x with loguru, and
#   SpikingJelly 0.0.0.0.14, which still has the cupy backend); each goes into its own /tmp/site_N, the tests run
#   with the first, and the benchmark runs once with each (one process per SpikingJelly version).
# SPIKEFUSE_DEBS: where the -dev packages the build needs (libcjson-dev, libinih-dev, libzip-dev) are missing and
#   cannot be installed, a folder of their Debian packages (with libcjson1, libinih1, libzip4), unpacked under
#   /tmp/deps for pkg-config.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp}
stages=" ${*:-tests ddp w1 w3 w12} "
want() { [[ $stages == *" $1 "* ]]; }
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
if [ -n "${SPIKEFUSE_DEBS:-}" ] && ! pkg-config --exists libcjson inih libzip 2>/dev/null; then
  rm -rf /tmp/deps && for f in "$SPIKEFUSE_DEBS"/*.deb; do dpkg -x "$f" /tmp/deps; done
  sed -i 's#=/usr#=/tmp/deps/usr#' /tmp/deps/usr/lib/*/pkgconfig/*.pc
  export PKG_CONFIG_PATH=$(echo /tmp/deps/usr/lib/*/pkgconfig)${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=$(echo /tmp/deps/usr/lib/*-linux-gnu)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} # their runtimes
fi
sites=()
n=0
IFS=: read -r -a wheel_dirs <<<"${SPIKEFUSE_WHEELS:-}"
for d in "${wheel_dirs[@]}"; do
  n=$((n + 1))
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_$n "$d"/*.whl && sites+=(/tmp/site_$n)
done
[ ${#sites[@]} -gt 0 ] || sites=("")
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
start=$(date +%s)
if ! python3 -m pip install -v --no-build-isolation --config-settings=cmake.define.SF_CUDA=ON \
    --config-settings=build-dir=build-python ./python \
    >"$OUT/pip_install.log" 2>&1; then
  tail -40 "$OUT/pip_install.log"; exit 1
fi
echo "pip install --no-build-isolation ./python: ok in $(( $(date +%s) - start )) s"
python3 -c "import spikefuse; print(spikefuse.LIBRARY_PATH, spikefuse.build_info(), 'cuda devices:', spikefuse.cuda_device_count())"
rc=0
if want tests; then
  (cd python/tests && PYTHONPATH=${sites[0]}:../../tests/ref python3 -m unittest discover -v -s . \
    >"$OUT/python_tests.log" 2>&1)
  rc=$?
  grep -E "skipped '|FAIL|ERROR" "$OUT/python_tests.log" | sort | uniq -c | head -20
  tail -3 "$OUT/python_tests.log"
fi
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
if want ddp; then
  one=$([ "$gpus" -ge 2 ] || echo --one-gpu) # one GPU: both ranks on it, reduced through gloo
  for flag in "" --compile --network; do
    python3 -m torch.distributed.run --standalone --nproc_per_node=2 python/tests/ddp_check.py $flag $one \
      >"$OUT/ddp_check$flag.log" 2>&1 || rc=1
    grep "ddp_check:" "$OUT/ddp_check$flag.log" || tail -5 "$OUT/ddp_check$flag.log"
  done
fi
n=0
for site in "${sites[@]}"; do
  n=$((n + 1))
  want w1 && PYTHONPATH=$site PYTHONUNBUFFERED=1 python3 python/bench/bench_w1.py --reps 30 \
    --json "$OUT/bench_w1_$n.json" 2>&1 | tee "$OUT/bench_w1_$n.log"
  want w3 && PYTHONPATH=$site PYTHONUNBUFFERED=1 python3 python/bench/bench_w3.py --reps 10 \
    --json "$OUT/bench_w3_$n.json" 2>&1 | tee "$OUT/bench_w3_$n.log"
done
if want w12; then
  PYTHONUNBUFFERED=1 python3 python/bench/bench_w12.py --reps 20 ${SF_BENCH_W3:+--c-bench "$SF_BENCH_W3"} \
    --json "$OUT/bench_w12.json" 2>&1 | tee "$OUT/bench_w12.log"
fi
exit $rc
