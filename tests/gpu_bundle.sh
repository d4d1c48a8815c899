#!/usr/bin/env bash
# gpu_bundle.sh [BUILD_DIR] — packs what tests/gpu.sh needs on a GPU machine that cannot configure the build (no
# -dev packages there): the GPU test and benchmark programs, the CLI and libspikefuse.so of BUILD_DIR (default
# build), and the shared libraries they load that are not CUDA's own or the C runtime's, into .carry/gpu.tar.xz
# (one archive: the programs share most of their bytes, which xz's 64 MiB window folds away: ~115 MB -> ~7 MB).
# On the GPU machine: tar -C .carry -xJf .carry/gpu.tar.xz, then
#   LD_LIBRARY_PATH=$PWD/.carry/gpu/lib SF_GPU_BIN=$PWD/.carry/gpu/bin tests/gpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=.carry/gpu
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib"
progs=$(ls tests/gpu/*.c bench/gpu/*.c | xargs -n1 basename | sed 's/\.c$//')
# bench_seed (bench/, runs on either device) for bench/run_seed_benchmarks.sh
cmake --build "$build" -j"$(nproc)" --target $progs bench_seed spikefuse_cli spikefuse >/dev/null
for p in $progs bench_seed; do cp "$build/$p" "$out/bin/"; done
cp "$build/spikefuse" "$build/libspikefuse.so" "$out/bin/"
# libraries from Debian that the GPU image lacks; CUDA's (cudart, cuBLAS, cuDNN, NCCL) and glibc's are there
ldd "$out"/bin/* | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/libcu|/libnccl|/libnv' |
    while read -r lib; do cp -L "$lib" "$out/lib/"; done
tar -C .carry -cf - gpu | xz -9 -T"$(nproc)" >.carry/gpu.tar.xz
rm -rf "$out"
du -h .carry/gpu.tar.xz | awk '{print "bundle: " $1 " in .carry/gpu.tar.xz"}'
