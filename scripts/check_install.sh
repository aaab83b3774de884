#!/usr/bin/env bash
# The installed library, as a user of it sees it: installs build/PRESET into a fresh prefix, then
# builds examples/consumer/ from a separate directory twice, once through find_package(minitrain)
# and once through pkg-config, runs both, and checks that each printed a finite loss, saved the
# same weights, and links no MPI or NVIDIA library.
#   usage: scripts/check_install.sh NAME   (build/NAME already built: release (static libraries), cpu (shared), ...)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:?usage: scripts/check_install.sh PRESET}
build=build/$preset
[ -f "$build/CMakeCache.txt" ] || { echo "check_install: $build is not configured; run scripts/setup.sh $preset" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
echo "[install] $preset: $(du -sh "$prefix" | cut -f1) in $prefix ($(find "$prefix/include" -name '*.h' | wc -l) headers)"

check_run() {  # check_run NAME BINARY: runs it, expects "final loss X" with X finite, and weights
  local name=$1 bin=$2 out
  out=$("$bin" "$work/$name.safetensors")
  echo "[install] $name: $out"
  python3 - "$out" <<'PY'
import math, sys
words = sys.argv[1].split()
assert words[:2] == ["final", "loss"], f"unexpected output: {sys.argv[1]!r}"
assert math.isfinite(float(words[2])), f"the loss is not finite: {words[2]}"
PY
  [ -s "$work/$name.safetensors" ] || { echo "check_install: $name saved no weights" >&2; exit 1; }
}

check_needed() {  # check_needed BINARY: a user's binary links no MPI and no NVIDIA library (the
  # CUDA runtime is static; cuBLAS, cuDNN, NCCL are opened on first use; MPI is minitrain::mpi).
  local needed
  needed=$(readelf -d "$1" | grep NEEDED)
  if grep -E 'libmpi|libcu(da|dart|blas|blasLt|dnn)|libnccl' <<<"$needed"; then
    echo "check_install: $1 links the libraries above; a user's binary must not" >&2
    exit 1
  fi
}

# find_package: only the installed prefix is given.
cmake -S examples/consumer -B "$work/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake-build" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
check_run find_package "$work/cmake-build/train_mlp"
check_needed "$work/cmake-build/train_mlp"

# pkg-config: one compiler line.
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --exists minitrain
# shellcheck disable=SC2046  # the flags are words
${CXX:-g++} -O2 examples/consumer/main.cpp -o "$work/train_mlp_pc" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs minitrain)
# A pkg-config link sets no run path: a shared build's libraries are found as a user would find
# them outside the system's directories.
LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" check_run pkg_config "$work/train_mlp_pc"
check_needed "$work/train_mlp_pc"

cmp -s "$work/find_package.safetensors" "$work/pkg_config.safetensors" ||
  { echo "check_install: the two builds saved different weights" >&2; exit 1; }
echo "[install] $preset: the consumer built and ran through find_package and pkg-config, and links no MPI or NVIDIA library"
