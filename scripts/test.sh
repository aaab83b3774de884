#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs the whole suite. Where a CUDA
# compiler exists it tests the CUDA build (GPU cases run where a GPU exists and report skipped
# where not); then a CPU-only build of the same tree; then the GPU cases on emulated GPUs (the
# emu preset: the CUDA code on CPU threads with AddressSanitizer and UBSan, no toolkit needed).
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

# The emulated GPU (cuda_emu/): its own semantics and checks, with AddressSanitizer and UBSan.
# The rest of the gpu-labelled suite runs there with `ctest --preset emu` (README); it joins CI
# once its run time on these 2-core machines is measured.
echo "[test] emulated GPU: ctest --preset emu -R CudaEmu"
cmake --preset emu >/dev/null
cmake --build --preset emu --target minitrain_cuda_emu_tests --parallel "$(nproc)"
ctest --preset emu -R '^CudaEmu'

