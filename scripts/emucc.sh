#!/usr/bin/env bash
# Compiles a standalone CUDA program for minitrain's emulated GPUs (cuda_emu/), with the memory
# checks on, as the emu build compiles minitrain's own .cu files:
#
#   scripts/emucc.sh SRC.cu... [-o EXE] [--tsan] [extra g++ flags...]
#
# Each .cu file is rewritten into host C++ (cuda_emu/rewrite_cuda.py) and compiled with
# <cuda_runtime.h> force-included. Default: AddressSanitizer + UBSan against build/emu's emulator
# library, with ASan's checks recovering into the emulator (Note [accesses routed to the checkers],
# cuda_emu/src/routed_memory.h), so MINITRAIN_EMU_COUNTERS=PATH writes the memory counters of each
# launch (docs/emulator_counters.md). --tsan: ThreadSanitizer against
# build/emu-tsan's library (races; no counters); EMUCC_BUILD_DIR names another build folder.
# Configure and build the library first:
#   cmake --preset emu && cmake --build build/emu --target minitrain_cuda_emu
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

out=a.out
tsan=0
srcs=()
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -o) out="$2"; shift 2 ;;
    --tsan) tsan=1; shift ;;
    *.cu) srcs+=("$1"); shift ;;
    *) extra+=("$1"); shift ;;
  esac
done
if [[ ${#srcs[@]} -eq 0 ]]; then
  echo "usage: scripts/emucc.sh SRC.cu... [-o EXE] [--tsan] [g++ flags...]" >&2
  exit 2
fi

if [[ $tsan -eq 1 ]]; then
  build="${EMUCC_BUILD_DIR:-$root/build/emu-tsan}"
  flags=(-fsanitize=thread -fno-omit-frame-pointer)
else
  build="${EMUCC_BUILD_DIR:-$root/build/emu}"
  flags=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
         -fsanitize-recover=address)
fi
lib="$build/cuda_emu/libminitrain_cuda_emu.a"
if [[ ! -f "$lib" ]]; then
  echo "emucc.sh: $lib not found; build it first: cmake --preset $(basename "$build") &&" \
       "cmake --build $build --target minitrain_cuda_emu" >&2
  exit 2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
objs=()
for src in "${srcs[@]}"; do
  [[ -f "$src" ]] || { echo "emucc.sh: $src: no such file" >&2; exit 2; }
  dir="$(cd "$(dirname "$src")" && pwd)"
  name="$(basename "$src")"
  python3 "$root/cuda_emu/rewrite_cuda.py" "$dir" "$name" "$work/src" "$work/$name.d" \
    "$work/src/$name.cpp"
  g++ -std=c++17 -O1 -g "${flags[@]}" -include cuda_runtime.h -I "$root/cuda_emu/include" \
    -I "$work/src" -I "$dir" "${extra[@]}" -c "$work/src/$name.cpp" -o "$work/$name.o"
  objs+=("$work/$name.o")
done
g++ "${flags[@]}" "${objs[@]}" "$lib" -lboost_context -pthread -o "$out"
