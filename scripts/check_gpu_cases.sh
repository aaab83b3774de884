#!/usr/bin/env bash
# Every gpu case of the CUDA build is also a case of the emulated build, which compiles only the
# test files that may hold gpu cases (Note [gpu tests only] in cmake/MinitrainHelpers.cmake): a
# file wrongly left out there would otherwise lose its cases silently. The vendor libraries' cases
# (cuDNN's and NCCL's suites) are compared only where both builds have them: the emulated build
# does not compile them.
#   usage: scripts/check_gpu_cases.sh build/release build/emu
set -euo pipefail
cd "$(dirname "$0")/.."
cuda_build=${1:?usage: scripts/check_gpu_cases.sh CUDA_BUILD EMULATED_BUILD}
emu_build=${2:?usage: scripts/check_gpu_cases.sh CUDA_BUILD EMULATED_BUILD}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gpu_cases() {  # gpu_cases BUILD: the names of its gpu-labelled ctest entries, sorted
  ctest --test-dir "$1" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: //p' | sort -u
}
gpu_cases "$cuda_build" | grep -Ev '^[A-Za-z]*(Cudnn|Nccl)[A-Za-z]*Cuda\.' >"$work/cuda" || true
gpu_cases "$emu_build" >"$work/emu"
[ -s "$work/cuda" ] || { echo "check_gpu_cases: $cuda_build registers no gpu case" >&2; exit 1; }
missing=$(comm -23 "$work/cuda" "$work/emu")
if [ -n "$missing" ]; then
  echo "check_gpu_cases: gpu cases of $cuda_build that $emu_build does not register:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "[gpu cases] all $(wc -l <"$work/cuda") gpu cases of $cuda_build are cases of $emu_build ($(wc -l <"$work/emu") there)"
