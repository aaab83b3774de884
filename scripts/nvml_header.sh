#!/usr/bin/env bash
# Prints the directory of an nvml.h for the CUDA toolkit of `nvcc`: the toolkit's own (its NVML
# component), else one unpacked from NVIDIA's nvidia-nvml-dev wheel on PyPI for the toolkit's major
# version (about 120 KB, kept in ~/.cache/minitrain/nvml-MAJOR). minitrain loads NVML at run time
# (core/gpu_monitor.h) and never links it: the header is all a build needs. Prints nothing and
# exits 1 when neither can be had (offline, no pip): the build then goes without NVML, and its runs
# say so.
#   scripts/nvml_header.sh [NVCC]
set -euo pipefail
nvcc=${1:-nvcc}
command -v "$nvcc" >/dev/null 2>&1 || exit 1
toolkit=$(cd "$(dirname "$(readlink -f "$(command -v "$nvcc")")")/.." && pwd)
if [ -f "$toolkit/include/nvml.h" ]; then
  echo "$toolkit/include"
  exit 0
fi
major=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
[ -n "$major" ] || exit 1
# CUDA 13 publishes the header as nvidia-nvml-dev, CUDA 12 and 11 as nvidia-nvml-dev-cuMAJOR.
if [ "$major" -ge 13 ]; then wheel="nvidia-nvml-dev==$major.*"; else wheel="nvidia-nvml-dev-cu$major==$major.*"; fi
cache=${XDG_CACHE_HOME:-$HOME/.cache}/minitrain/nvml-$major
if [ ! -f "$cache/include/nvml.h" ]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$scratch" "$wheel" \
    >/dev/null 2>&1 || exit 1
  python3 -m zipfile -e "$scratch"/*.whl "$scratch/x" >/dev/null 2>&1 || exit 1
  header=$(find "$scratch/x" -name nvml.h | head -1)
  [ -n "$header" ] || exit 1
  mkdir -p "$cache/include"
  cp "$header" "$cache/include/nvml.h"
fi
echo "$cache/include"
