#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs the whole suite. Where a CUDA
# compiler exists it tests the CUDA build (GPU cases run where a GPU exists and report skipped
# where not); then a CPU-only build of the same tree; then every GPU case again on emulated GPUs
# (the emu preset: the CUDA code on CPU threads with AddressSanitizer and UBSan, no toolkit needed);
# then the file readers' fuzz targets (the fuzz preset: clang, libFuzzer, ASan and UBSan); then
# in CI, the CUDA build once more, compiled against CUDA 12 (scripts/check_cuda12.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# In CI the CUDA build compiles sm_90 only (CMake's CUDAARCHS, read at the first configure): the
# CUDA 12 check at the end compiles sm_80, so each architecture is compiled once. A user's build
# keeps both (Note [CUDA architectures] in CMakeLists.txt).
if [ "${CI:-}" = true ] && [ -z "${CUDAARCHS:-}" ]; then
  export CUDAARCHS=90
fi
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  presets=(release cpu)
else
  presets=(cpu)
fi
# The formatting first (after the packages, clang-format among them): seconds, and a formatting
# slip should not wait for the builds to show.
scripts/setup.sh --deps-only
scripts/format.sh --check
# In CI (no GPU there) nothing is built twice for nothing (setup.sh --ci; docs/testing.md, "What
# each stage buys"): the CUDA build compiles and runs only the test files that may hold gpu cases
# (Note [gpu tests only]): their gpu cases are compiled by nvcc and registered (check_gpu_cases.sh
# below compares them with the emulated build's), their cpu cases run on the CUDA build's code (the
# device, driver and library paths under #if MINITRAIN_WITH_CUDA live in those files); every other
# file's cases are plain C++ that the cpu preset compiles and runs, where they ran a second time
# before. scripts/check_every_case_runs.py below proves that no case is lost. The minitrain
# command's own cases (tests/tools) run in both builds: they test each build's binary. The bench
# programs are built by the CUDA build only: their CUDA-only code is under #if without an #else,
# so the CUDA build compiles all of what the cpu one would (and the GPU run kit's cases pack them). A user's run keeps both builds whole:
# with a GPU, the CUDA build's gpu cases run there for real.
setup_flags=()
if [ "${CI:-}" = true ]; then
  setup_flags=(--ci)
fi
scripts/setup.sh "${setup_flags[@]}" "${presets[@]}"
for preset in "${presets[@]}"; do
  echo "[test] ctest --preset $preset (${SECONDS} s since the start)"
  ctest --preset "$preset"
  # The installed library from outside: cmake --install, then examples/consumer/ built through
  # find_package(minitrain) and through pkg-config, and run. release installs static libraries,
  # cpu shared ones (BUILD_SHARED_LIBS=ON), so both kinds are installed and used.
  scripts/check_install.sh "$preset"
done
# The static executables (Note [static build]: CPU-only, no MPI): not dynamic, run under env -i,
# and save the cpu build's weights bit for bit.
# Only the two programs the check runs (the library is compiled once more, static and without MPI,
# as a unity build: Note [unity builds] in cmake/MinitrainUnity.cmake).
echo "[test] static executables: scripts/check_static.sh (${SECONDS} s since the start)"
cmake --preset static >/dev/null
cmake --build --preset static --target minitrain example_regression_mlp --parallel "$(nproc)"
scripts/check_static.sh

# The gpu-labelled suite on emulated GPUs (cuda_emu/: the CUDA code on CPU threads, with
# AddressSanitizer and UBSan; no toolkit or driver needed): every case that needs only the CUDA
# runtime runs, those that need cuBLAS, cuDNN or NCCL report skipped with the reason.
echo "[test] emulated GPUs: ctest --preset emu (${SECONDS} s since the start)"
scripts/setup.sh emu
ctest --preset emu
# The emulated build compiles only the test files that may hold gpu cases (Note [gpu tests only]);
# that it lost none is checked against the CUDA build's list where there is one.
if [ -d build/release ] && [[ " ${presets[*]} " == *" release "* ]]; then
  scripts/check_gpu_cases.sh build/release build/emu
  # Every TEST of tests/ is registered by a build whose ctest run above includes it (the emulated
  # build runs its gpu label only): a file that no build compiles, or compiles and does not run,
  # fails here by name.
  python3 scripts/check_every_case_runs.py build/release build/cpu build/emu:gpu
fi

# Races in every kernel: the kernel test programs' gpu cases again on the emu build, with racecheck
# (MINITRAIN_EMU_RACECHECK=1: a report names the kernel and both lines; docs/emulator_checks.md),
# sizes capped at 5000 elements and the cases that only repeat a kernel at a larger size left out
# (scripts/racecheck_kernels.sh lists them), two programs at a time: about 3 min on 2 cores. The
# broken table and CudaEmuRacecheck.* run in the emu stage above. MINITRAIN_TEST_RACECHECK=0 skips
# it; MINITRAIN_RACECHECK_ALL=1 runs every case at full size (about 25 min).
if [ "${MINITRAIN_TEST_RACECHECK:-1}" != 0 ]; then
  echo "[test] racecheck on emulated GPUs: scripts/racecheck_kernels.sh (${SECONDS} s since the start)"
  scripts/racecheck_kernels.sh build/emu
fi

# Races: the emulator's own cases and the broken-kernel table under ThreadSanitizer (the emu-tsan
# preset), their two programs alone rather than the whole tree (docs/emulator_checks.md: a missing
# barrier, a race before a barrier or __syncwarp, a plain += across blocks, a shared histogram
# with ++, two streams without an event are reported there).
echo "[test] races on emulated GPUs: ctest --preset emu-tsan -R '^Cuda(Emu|BrokenKernels)' (${SECONDS} s since the start)"
cmake --preset emu-tsan >/dev/null
cmake --build --preset emu-tsan --target minitrain_cuda_emu_tests minitrain_broken_kernels --parallel "$(nproc)"
ctest --preset emu-tsan -R '^Cuda(Emu|BrokenKernels)'

# The readers' libFuzzer targets (tests/fuzz/): every known reproducer and seed, then a bounded
# fuzzing run per target (MINITRAIN_FUZZ_SECONDS, 30 s each, two at a time; 15 s in CI, where
# setup.sh --ci sets it). scripts/fuzz.sh runs them longer by hand.
echo "[test] fuzzing: ctest --preset fuzz (${SECONDS} s since the start)"
scripts/setup.sh "${setup_flags[@]}" fuzz
ctest --preset fuzz
# CUDA 12: the CUDA build compiled and linked (not run on a GPU) against a pinned CUDA 12.4 toolkit
# assembled from PyPI's NVIDIA wheels and Debian's nvcc (scripts/cuda12_toolkit.sh), beside the
# machine's CUDA 13 build above; sm_80 only, no tests. It downloads about 1.3 GB once, so it runs
# in CI (CI=true) and where MINITRAIN_CHECK_CUDA12=1 asks for it.
if [ "${CI:-}" = true ] || [ "${MINITRAIN_CHECK_CUDA12:-}" = 1 ]; then
  echo "[test] CUDA 12 compile: scripts/check_cuda12.sh (${SECONDS} s since the start)"
  scripts/check_cuda12.sh
else
  echo "[test] CUDA 12 compile: not run (CI=true or MINITRAIN_CHECK_CUDA12=1 runs it; 1.3 GB download)"
fi
echo "[test] all suites passed in ${SECONDS} s"
