#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs the whole suite. Where a CUDA
# compiler exists it tests the CUDA build (GPU cases run where a GPU exists and report skipped
# where not); then a CPU-only build of the same tree; then every GPU case again on emulated GPUs
# (the emu preset: the CUDA code on CPU threads with AddressSanitizer and UBSan, no toolkit needed).
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  presets=(release cpu)
else
  presets=(cpu)
fi
scripts/setup.sh "${presets[@]}"
for preset in "${presets[@]}"; do
  echo "[test] ctest --preset $preset (${SECONDS} s since the start)"
  ctest --preset "$preset"
done

# The gpu-labelled suite on emulated GPUs (cuda_emu/: the CUDA code on CPU threads, with
# AddressSanitizer and UBSan; no toolkit or driver needed): every case that needs only the CUDA
# runtime runs, those that need cuBLAS, cuDNN or NCCL report skipped with the reason.
echo "[test] emulated GPUs: ctest --preset emu (${SECONDS} s since the start)"
scripts/setup.sh emu
ctest --preset emu
echo "[test] all suites passed in ${SECONDS} s"
