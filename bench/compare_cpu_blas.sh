#!/usr/bin/env bash
# The CPU BLAS choices Debian offers on this machine, one thread each, on the MLP step's GEMM
# shapes, as % of one core's measured peak FP32 (bench/blas_choice.cpp): OpenBLAS under each x86-64
# kernel set it ships (OPENBLAS_CORETYPE), BLIS, oneDNN, and Eigen's own kernels built for the
# baseline (as minitrain builds it) and for x86-64-v4 (AVX-512). BLIS and oneDNN are not minitrain
# dependencies: their Debian packages are downloaded (apt-get download) and unpacked into a
# temporary folder, not installed. Each library runs pinned to one core, 15 rounds per shape, the
# fastest round kept (a shared machine disturbs some).
#
#   bench/compare_cpu_blas.sh [CPU to pin to (default 0)]
set -euo pipefail
cd "$(dirname "$0")/.."
cpu="${1:-0}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -qq libblis4-serial libblis-serial-dev libdnnl2 libdnnl-dev 2>/dev/null)
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
lib="$work/root/usr/lib/x86_64-linux-gnu" inc="$work/root/usr/include"
common=(-std=c++17 -O2 -I. bench/blas_choice.cpp core/cpu_features.cpp core/thread_policy.cpp)
openblas_inc="$(pkg-config --cflags openblas)"
g++ "${common[@]}" -DUSE_CBLAS -DOPENBLAS_THREAD $openblas_inc -lopenblas -o "$work/openblas"
g++ "${common[@]}" -DUSE_CBLAS -I"$inc/x86_64-linux-gnu/blis-serial" \
  "$lib/blis-serial/libblis.so.4" -Wl,-rpath,"$lib/blis-serial" -o "$work/blis"
g++ "${common[@]}" -DUSE_DNNL -I"$inc" "$lib/libdnnl.so.2" -Wl,-rpath,"$lib" -o "$work/onednn"
g++ "${common[@]}" -DUSE_EIGEN -I/usr/include/eigen3 -o "$work/eigen"
g++ "${common[@]}" -DUSE_EIGEN -march=x86-64-v4 -I/usr/include/eigen3 -o "$work/eigen_v4"

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load average $(cut -d' ' -f1-3 /proc/loadavg)"
for core in Prescott Haswell SkylakeX Cooperlake; do
  OPENBLAS_CORETYPE=$core taskset -c "$cpu" "$work/openblas" "openblas-$core"
done
unset OPENBLAS_CORETYPE
taskset -c "$cpu" "$work/openblas" "openblas-as-loaded"
taskset -c "$cpu" "$work/blis" blis
taskset -c "$cpu" "$work/onednn" onednn
taskset -c "$cpu" "$work/eigen" eigen-baseline
if grep -qw avx512f /proc/cpuinfo; then taskset -c "$cpu" "$work/eigen_v4" eigen-x86-64-v4; fi
