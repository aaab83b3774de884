#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks (only what is missing), then configures and
# builds minitrain. With nvcc on PATH or in /usr/local/cuda the build compiles the CUDA code;
# without it the same tree builds CPU-only.
#
#   scripts/setup.sh                  build the default preset (release)
#   scripts/setup.sh release cpu      build several presets (release, debug, cpu, static, emu,
#                                     emu-tsan, fuzz)
#   scripts/setup.sh --deps-only      install the packages and stop
#   scripts/setup.sh --ci release cpu CI's trimmed builds (docs/testing.md, "What each stage buys"):
#                                     release compiles only the test files that may hold gpu
#                                     cases (Note [gpu tests only]), cpu builds no benchmarks,
#                                     fuzz's bounded runs fuzz 15 s per target instead of 30;
#                                     without --ci all three are whole again
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*"; }

# ---- packages ---------------------------------------------------------------------------------
# Debian 12 package per need. GoogleTest, Google Benchmark and the CUDA toolkit are expected on
# the machine already but are installed here too if missing (the toolkit is not: it comes from
# NVIDIA, and without it the build is CPU-only). clang with its sanitizer and libFuzzer runtimes
# (libclang-rt-14-dev) and its OpenMP (libomp-14-dev) build the fuzz preset; clang-format checks
# the formatting (scripts/format.sh); pip downloads the CUDA 12 wheels (scripts/cuda12_toolkit.sh);
# patchelf sets the run paths of the GPU run kit's bundle (scripts/gpu_bundle.sh, docs/gpu_kit.md).
packages=(
  cmake ninja-build g++ pkg-config
  libgtest-dev libbenchmark-dev
  libeigen3-dev libopenblas-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libtomlplusplus-dev
  libopenmpi-dev openmpi-bin
  libboost-context-dev python3 python3-pip python3-matplotlib
  clang libclang-rt-14-dev libomp-14-dev clang-format
  patchelf
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "all packages present"
fi

# ---- Python packages from PyPI (not in Debian 12) ------------------------------------------------
# onnx writes `minitrain export --format onnx` graphs; onnxruntime runs them in the export tests
# (tests/tools/export_check.py, which report themselves skipped without them). Installed into the
# python3 on PATH, only when missing; Debian's own python3 refuses pip without
# --break-system-packages (PEP 668), a pyenv or venv one takes it as it is.
if ! python3 -c "import onnx, onnxruntime" >/dev/null 2>&1; then
  pip_flags=(--quiet)
  python3 -m pip install --help 2>/dev/null | grep -q -- --break-system-packages &&
    [ -f "$(python3 -c 'import sys, sysconfig; print(sysconfig.get_path("stdlib"))')/EXTERNALLY-MANAGED" ] &&
    pip_flags+=(--break-system-packages)
  log "installing from PyPI: onnx onnxruntime"
  python3 -m pip install "${pip_flags[@]}" onnx onnxruntime ||
    log "pip could not install onnx and onnxruntime (offline?): export --format onnx and its tests are unavailable"
else
  log "onnx and onnxruntime present"
fi

presets=()
ci=false
for arg in "$@"; do
  case "$arg" in
    --deps-only) exit 0 ;;
    --ci) ci=true ;;
    release|debug|cpu|static|emu|emu-tsan|fuzz) presets+=("$arg") ;;
    *) echo "setup.sh: unknown argument '$arg' (expected release, debug, cpu, static, emu, emu-tsan, fuzz, --ci or --deps-only)" >&2; exit 2 ;;
  esac
done
((${#presets[@]})) || presets=(release)

# ---- CUDA -------------------------------------------------------------------------------------
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if command -v nvcc >/dev/null 2>&1; then
  log "CUDA compiler: $(command -v nvcc) ($(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
else
  log "no CUDA compiler found: building CPU-only"
fi

# ---- configure and build ------------------------------------------------------------------------
# nvcc and the Eigen-heavy sources each take about a GiB; one job per core fits the 2-core,
# 24 GiB machines CI runs on.
jobs=$(nproc)
# NVML (GPU utilisation in the metrics) is opened at run time; a CUDA build needs only its header,
# which a toolkit without its NVML component lacks: scripts/nvml_header.sh finds or fetches it.
nvml=()
if command -v nvcc >/dev/null 2>&1; then
  if nvml_dir=$(scripts/nvml_header.sh nvcc); then
    nvml=("-DNVML_INCLUDE_DIR=$nvml_dir")
  else
    log "no nvml.h (offline?): CUDA builds go without NVML, and their runs say so"
  fi
fi
# --ci's two options are given either way, so that a build folder set up once with --ci is whole
# again the next time it is set up without.
# The bench programs are left to the CUDA build only where there is one in this run.
gpu_tests_only=OFF benchmarks=ON fuzz_seconds=30
if $ci; then
  gpu_tests_only=ON
  # Fuzzing is bounded by time, not by the CPU: 4 targets x 30 s, two at a time, was a minute of
  # every CI run. Every kept reproducer and seed still runs; scripts/fuzz.sh fuzzes longer by hand.
  fuzz_seconds=15
  if [[ " ${presets[*]} " == *" release "* ]] && command -v nvcc >/dev/null 2>&1; then
    benchmarks=OFF
  fi
fi
for preset in "${presets[@]}"; do
  log "configuring preset '$preset'"
  case "$preset" in
    release) cmake --preset "$preset" "${nvml[@]}" -DMINITRAIN_GPU_TESTS_ONLY=$gpu_tests_only >/dev/null ;;
    debug) cmake --preset "$preset" "${nvml[@]}" >/dev/null ;;
    cpu) cmake --preset "$preset" -DMINITRAIN_BUILD_BENCHMARKS=$benchmarks >/dev/null ;;
    fuzz) cmake --preset "$preset" -DMINITRAIN_FUZZ_SECONDS=$fuzz_seconds >/dev/null ;;
    *) cmake --preset "$preset" >/dev/null ;;
  esac
  log "building preset '$preset' with $jobs jobs"
  cmake --build --preset "$preset" --parallel "$jobs"
done
log "done: build/release/tools/minitrain train  (or: info, predict, --help)"
