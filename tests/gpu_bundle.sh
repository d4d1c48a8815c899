#!/usr/bin/env bash
# gpu_bundle.sh [BUILD_DIR] — packs what tests/gpu.sh needs on a GPU machine that cannot configure the build (no
# -dev packages there): the GPU test and benchmark programs, the CLI and libspikefuse.so of BUILD_DIR (default
# build), and the shared libraries they load that are not CUDA's own or the C runtime's, into .carry/gpu.tar.xz
# (one archive: the programs share most of their bytes, which one xz stream with a 1 GiB window folds away).
# On the GPU machine: tar -C .carry -xJf .carry/gpu.tar.xz, then
#   LD_LIBRARY_PATH=$PWD/.carry/gpu/lib SF_GPU_BIN=$PWD/.carry/gpu/bin tests/gpu.sh
# and, on a machine with several GPUs, SF_GPU_BIN=$PWD/.carry/gpu/bin tests/gpu/multi_gpu.sh (it finds the OpenMPI
# runtime packed beside bin/ when the machine has no mpirun).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=.carry/gpu
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib"
# bench_events and bench_seed (bench/, run on either device; bench_seed for bench/run_seed_benchmarks.sh)
# SF_BUNDLE_PROGS names a subset: each program links the whole library (about 45 MB), and xz folds the copies away
# only while the archive's input fits its 1 GiB window (about 22 programs)
progs=${SF_BUNDLE_PROGS:-"$(ls tests/gpu/*.c bench/gpu/*.c tests/distributed/*.c | xargs -n1 basename | sed 's/\.c$//') bench_events bench_seed"}
cmake --build "$build" -j"$(nproc)" --target $progs spikefuse_cli spikefuse >/dev/null
for p in $progs; do cp "$build/$p" "$out/bin/" 2>/dev/null || cp "$build/tests/$p" "$out/bin/"; done
cp "$build/spikefuse" "$build/libspikefuse.so" "$out/bin/"
# libraries from Debian that the GPU image lacks (libhdf5 brings curl's and TLS libraries along); CUDA's
# (cudart, cuBLAS, cuDNN, NCCL) and glibc's (libresolv included) are there
ldd "$out"/bin/* | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/libcu|/libnccl|/libnv' |
    while read -r lib; do cp -L "$lib" "$out/lib/"; done
# OpenMPI's runtime for tests/gpu/multi_gpu.sh where the GPU machine has none: mpirun, its plugins and help files
# under ompi/usr (relocated there through OPAL_PREFIX), PMIx's plugins, and the libraries they load (SF_BUNDLE_MPI=0
# leaves it out: a few MB less to carry to a one-GPU machine)
if [ "${SF_BUNDLE_MPI:-1}" != 0 ] && command -v orterun >/dev/null; then
    o=$out/ompi/usr
    mkdir -p "$o/bin" "$o/lib/x86_64-linux-gnu" "$o/share"
    cp -L "$(command -v orterun)" "$(command -v orted)" "$o/bin/"
    ln -s orterun "$o/bin/mpirun"
    cp -a /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 "$o/lib/x86_64-linux-gnu/"
    cp -a /usr/share/openmpi "$o/share/"
    for f in "$o"/bin/* "$o"/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so "$o"/lib/x86_64-linux-gnu/pmix2/lib/pmix/*.so; do
        ldd "$f" 2>/dev/null
    done | awk '/=> \//{print $3}' | sort -u |
        grep -vE '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/libcu|/libnccl|/libnv' |
        while read -r lib; do [ -e "$out/lib/$(basename "$lib")" ] || cp -L "$lib" "$out/lib/"; done
fi
tar -C .carry -cf - gpu | xz --lzma2=preset=9,dict=1GiB -T1 >.carry/gpu.tar.xz
rm -rf "$out"
du -h .carry/gpu.tar.xz | awk '{print "bundle: " $1 " in .carry/gpu.tar.xz"}'
