#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs the whole suite. Where a CUDA
# compiler exists it tests the CUDA build (GPU cases run where a GPU exists and report skipped
# where not) and then a CPU-only build of the same tree; without one, the CPU-only build alone.
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  presets=(release cpu)
else
  presets=(cpu)
fi
scripts/setup.sh "${presets[@]}"
for preset in "${presets[@]}"; do
  echo "[test] ctest --preset $preset"
  ctest --preset "$preset"
done
