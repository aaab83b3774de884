#!/usr/bin/env bash
# Note [lazy CUDA libraries] (core/CMakeLists.txt), end to end: the CUDA build's minitrain links
# no CUDA library but the static runtime, opens cuBLAS only on a GPU path's first call, and with
# every NVIDIA library hidden (tmpfs mounted over their directories in a private mount namespace)
# still starts, prints --help and info, and trains on the CPU; the GPU path then fails with the
# loader's DeviceError naming what is missing, and info --libraries exits 1 saying the same. The
# driver's NVML (the metrics' GPU utilisation) is hidden too, file by file (it lives among the
# system's libraries): the GPU monitor's note then carries the loader's message, not an error.
#   vendor_libraries_check.sh MINITRAIN PROBE LIBRARY_FILE...
# NVML_BUILT=1 in the environment: the build has NVML (nvml.h was found), so its loader must speak.
# Exit 77 (ctest: skipped) where a mount namespace cannot be made (not root, no unshare).
set -uo pipefail
minitrain=$1 probe=$2
shift 2
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. Nothing NVIDIA among the binaries' dependencies, and the probe's first call loads cuBLAS.
for binary in "$minitrain" "$probe"; do
  needed=$(readelf -d "$binary" | grep NEEDED) || fail "readelf -d $binary"
  if grep -E 'libcu(blas|blasLt|dnn|dart)|libnccl' <<<"$needed"; then
    fail "$binary links an NVIDIA library (above): they must be opened at run time"
  fi
done
out=$("$probe") || fail "the probe could not open cuBLAS with the libraries visible: $out"
grep -q '^before the first call: not loaded$' <<<"$out" || fail "cuBLAS was loaded before use: $out"
grep -Eq '^cuBLAS [0-9]+ from .*libcublas\.so\.[0-9]+' <<<"$out" || fail "probe said: $out"
echo "visible: $out"

# 2. The same with the libraries' directories hidden.
dirs=()
for file in "$@"; do dirs+=("$(dirname "$(readlink -f "$file")")"); done
mapfile -t dirs < <(printf '%s\n' "${dirs[@]}" | sort -u)
if ! command -v unshare >/dev/null || ! unshare -m --propagation private true 2>/dev/null; then
  echo "SKIP: cannot make a private mount namespace here (needs root and unshare)"
  exit 77
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Inside the namespace: hide, check that the libraries are gone, then run the four commands.
# shellcheck disable=SC2016
unshare -m --propagation private bash -c '
  set -u
  minitrain=$1 probe=$2 scratch=$3; shift 3
  for d in "$@"; do mount -t tmpfs none "$d" || exit 90; done
  for d in "$@"; do [ -z "$(ls -A "$d")" ] || exit 91; done
  for f in $(ldconfig -p | sed -n "s/.*libnvidia-ml\.so[.0-9]* .*=> //p"); do
    mount --bind /dev/null "$f" || exit 92
  done
  "$minitrain" --help >"$scratch/help" 2>&1; echo $? >"$scratch/help.rc"
  "$minitrain" info >"$scratch/info" 2>&1; echo $? >"$scratch/info.rc"
  "$minitrain" train --device cpu --steps 3 --progress lines >"$scratch/train" 2>&1
  echo $? >"$scratch/train.rc"
  "$probe" >"$scratch/probe" 2>&1; echo $? >"$scratch/probe.rc"
  "$minitrain" info --libraries >"$scratch/libraries" 2>&1; echo $? >"$scratch/libraries.rc"
  "$probe" nvml >"$scratch/nvml" 2>&1; echo $? >"$scratch/nvml.rc"
' hide "$minitrain" "$probe" "$scratch" "${dirs[@]}"
rc=$?
[ "$rc" -eq 0 ] || fail "could not hide ${dirs[*]} (exit $rc)"
echo "hidden: ${dirs[*]}"
for step in help info train; do
  [ "$(cat "$scratch/$step.rc")" = 0 ] || fail "minitrain $step failed without the libraries: $(cat "$scratch/$step")"
done
grep -q 'opened on first GPU use' "$scratch/info" || fail "info: $(cat "$scratch/info")"
grep -q '^done: ' "$scratch/train" || fail "train: $(cat "$scratch/train")"
[ "$(cat "$scratch/probe.rc")" = 3 ] || fail "probe without cuBLAS: exit $(cat "$scratch/probe.rc"): $(cat "$scratch/probe")"
grep -Eq 'cuBLAS \(libcublas\.so\.[0-9]+\) could not be loaded' "$scratch/probe" || fail "probe: $(cat "$scratch/probe")"
grep -q 'LD_LIBRARY_PATH' "$scratch/probe" || fail "no advice: $(cat "$scratch/probe")"
# info --libraries checks an installation: it exits 1 and says what it could not open.
[ "$(cat "$scratch/libraries.rc")" = 1 ] || fail "info --libraries without them: exit $(cat "$scratch/libraries.rc")"
grep -Eq 'cuBLAS missing, cuDNN missing, NCCL missing .*cuBLAS \(libcublas\.so\.[0-9]+\) could not be loaded' \
  "$scratch/libraries" || fail "info --libraries: $(cat "$scratch/libraries")"
# NVML missing is a note, not an error; a build with NVML names the library and where it looked.
[ "$(cat "$scratch/nvml.rc")" = 0 ] || fail "probe nvml: exit $(cat "$scratch/nvml.rc"): $(cat "$scratch/nvml")"
if [ "${NVML_BUILT:-0}" = 1 ]; then
  grep -Eq '^NVML note: NVML \(libnvidia-ml\.so\.1\) could not be loaded; .*looked in: libnvidia-ml\.so\.1: ' \
    "$scratch/nvml" || fail "probe nvml: $(cat "$scratch/nvml")"
else
  grep -q '^NVML note: NVML is absent from this build' "$scratch/nvml" || fail "probe nvml: $(cat "$scratch/nvml")"
fi
echo "without the libraries: --help, info and a CPU train ran; the first cuBLAS call said:"
sed -n 's/^error: //p' "$scratch/probe" | head -3
echo "and the GPU monitor: $(cat "$scratch/nvml")"
echo "PASS"
