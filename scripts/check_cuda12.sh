#!/usr/bin/env bash
# Proves the CUDA build compiles and links against CUDA 12 too (the main build uses the machine's
# CUDA 13): assembles the pinned 12.4 toolkit (scripts/cuda12_toolkit.sh, cached in
# build/cuda12-toolkit), builds the minitrain command in build/cuda12 for sm_80 only (that is every
# library: the command links them all, so every .cu file and every file on cuBLAS, cuDNN or NCCL is
# compiled against CUDA 12's headers and linked against its runtime; the examples and tests are
# plain C++ on the same libraries and buy nothing more here), then checks that no header or
# library of another CUDA toolkit crept in. Nothing runs on a GPU; `minitrain info` runs (on the
# CPU) to name the versions compiled in.
#   usage: scripts/check_cuda12.sh   (non-zero exit when anything fails; CHECK_CUDA12_JOBS=N for
#          N compile jobs instead of one per core)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
log() { printf '[cuda12] %s\n' "$*"; }
fail() { printf 'check_cuda12: %s\n' "$*" >&2; exit 1; }

toolkit=$PWD/build/cuda12-toolkit
build=build/cuda12
scripts/cuda12_toolkit.sh "$toolkit"
# Ahead of /usr/local/cuda/bin, so that nothing finds the CUDA 13 nvcc by PATH; and none of the
# variables that point compilers or CMake at another toolkit (LIBRARY_PATH, CUDA_HOME, ...).
export PATH="$toolkit/bin:$PATH"
unset CUDA_HOME CUDA_PATH CUDACXX CUDAHOSTCXX LIBRARY_PATH CPATH C_INCLUDE_PATH CPLUS_INCLUDE_PATH
nvcc_version=$("$toolkit/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\), \(V[0-9.]*\).*/\1 (\2)/p')
log "nvcc $nvcc_version: $toolkit/bin/nvcc"

# The wheels ship no static cudart (libcudart_static.a), so this build links the shared runtime
# (CMAKE_CUDA_RUNTIME_LIBRARY=Shared; the default build links the static one, Note [lazy CUDA
# libraries] in core/CMakeLists.txt), which also keeps the linker from falling back to another
# toolkit's static cudart in a default search path such as /usr/local/lib. A unity build (Note
# [unity builds] in cmake/MinitrainUnity.cmake: the C++ files in batches, about a third less
# compiler time; the .cu files one by one): this build only checks that the code compiles and links.
# For the same reason the host code is not optimised (Debug with no flags: -O0, no -g; the device
# code is still optimised by ptxas, whose default is -O3): `minitrain info` is all it runs, and
# an unoptimised compile costs the C++ about a third less CPU time (docs/testing.md).
configure_start=$SECONDS
cmake -S . -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG= -DCMAKE_CUDA_FLAGS_DEBUG= \
  -DCMAKE_CUDA_COMPILER="$toolkit/bin/nvcc" \
  -DCUDAToolkit_ROOT="$toolkit" -DCUDNN_ROOT="$toolkit" -DNCCL_ROOT="$toolkit" \
  -DCMAKE_CUDA_ARCHITECTURES=80 -DCMAKE_CUDA_RUNTIME_LIBRARY=Shared -DCMAKE_UNITY_BUILD=ON \
  -DMINITRAIN_BUILD_TESTS=OFF -DMINITRAIN_BUILD_BENCHMARKS=OFF -DMINITRAIN_INSTALL=OFF >/dev/null
# What CMake found must be this toolkit's (the cuDNN and NCCL ones only where the build looks them up).
for var in CMAKE_CUDA_COMPILER CUDNN_INCLUDE_DIR CUDNN_LIBRARY NCCL_INCLUDE_DIR NCCL_LIBRARY; do
  value=$(sed -n "s/^$var:[A-Z]*=//p" "$build/CMakeCache.txt")
  [ -n "$value" ] || [ "$var" != CMAKE_CUDA_COMPILER ] || fail "CMake found no CUDA compiler"
  [ -n "$value" ] || continue
  case "$(realpath -m "$value")" in
    "$toolkit"/*) ;;
    *) fail "$var is '$value', not in $toolkit (another toolkit was found first)" ;;
  esac
done
log "configured $build in $((SECONDS - configure_start)) s"

jobs=${CHECK_CUDA12_JOBS:-$(nproc)}
build_start=$SECONDS
cmake --build "$build" --target minitrain --parallel "$jobs"
log "built $build with $jobs jobs in $((SECONDS - build_start)) s"

# Every header an object was compiled with (ninja's recorded dependencies) and every library the
# binaries load must be CUDA 12's: a CUDA 13 header from /usr/local/include or /usr/local/cuda
# would make this check prove nothing.
strays=$(ninja -C "$build" -t deps | grep -E '^ +/' | grep -vF "$PWD/" |
         grep -E 'cuda|cudnn|nccl|cublas|/crt/' | sort -u | head -n 20 || true)
[ -z "$strays" ] || fail "headers from outside $toolkit were compiled in:
$strays"
minitrain=$build/tools/minitrain
[ -x "$minitrain" ] || fail "$minitrain was not built"
needed=$(readelf -d "$minitrain" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
case "$needed" in *libcudart.so.12*) ;; *) fail "$minitrain does not link the CUDA 12 runtime: $needed" ;; esac
# cuBLAS, cuDNN and NCCL are opened at run time, by the sonames of the headers compiled against.
case "$needed" in *libcublas* | *libcudnn* | *libnccl* | *libcudart.so.13*)
  fail "$minitrain links a vendor library or CUDA 13's runtime: $needed" ;;
esac
# The versions compiled in are CUDA 12's: `minitrain info` runs without a GPU, and without one it
# names the versions it was compiled against (the sonames it will open carry the same majors).
info=$(LD_LIBRARY_PATH="$toolkit/lib64" "$minitrain" info) || fail "minitrain info failed: $info"
grep -q '^CUDA runtime 12\.' <<<"$info" || fail "info names another runtime: $info"
grep -Eq '^cuBLAS 12\.[0-9.]+, cuDNN 9\.[0-9.]+, NCCL 2\.[0-9.]+ \(compiled against' <<<"$info" ||
  fail "info names other library versions: $info"
log "$(grep -E '^(CUDA runtime|cuBLAS)' <<<"$info" | tr '\n' ';')"
# And at run time the stubs open CUDA 12's libraries by their sonames (the wheels' copies here;
# info --libraries opens them without a GPU). cuDNN's version is read from its sub-libraries,
# which this toolkit leaves out (cuda12_toolkit.sh): the libcudnn.so.9 shim finds them on the
# loader's path, so on a machine with another cuDNN 9 that one's version is shown.
libraries=$(LD_LIBRARY_PATH="$toolkit/lib64" "$minitrain" info --libraries) ||
  fail "minitrain info --libraries could not open CUDA 12's libraries: $libraries"
grep -Eq "^cuBLAS 12\.[0-9.]+, cuDNN 9\.[0-9.]+, NCCL 2\.[0-9.]+ \(loaded: [^)]*libcublas\.so\.12" <<<"$libraries" ||
  fail "info --libraries: $libraries"
log "$(grep -E '^cuBLAS' <<<"$libraries")"
log "minitrain needs: $needed"
log "CUDA 12 ($nvcc_version) build compiled and linked in $((SECONDS - start)) s"
