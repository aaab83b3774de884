#!/usr/bin/env bash
# Registers and static shared memory per kernel, from the real compiler (issue 29, occupancy):
#   scripts/kernel_resources.sh [--arch sm_90] FILE.cu...
# prints one tab-separated line per kernel: file, demangled kernel, registers, static shared
# bytes, spill stores, as ptxas reports them (nvcc --resource-usage). Needs nvcc; without it, says
# so and exits 2 (registers unknown: nothing is invented).
set -euo pipefail
arch=sm_90
if [[ "${1:-}" == "--arch" ]]; then
  arch=$2
  shift 2
fi
if ! command -v nvcc >/dev/null; then
  echo "kernel_resources.sh: nvcc not found: registers unknown" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
printf 'file\tkernel\tregisters\tstatic_smem\tspill_stores\n'
for src in "$@"; do
  nvcc -arch="$arch" --resource-usage -std=c++17 -I"$root" -c "$src" -o /dev/null 2>&1 |
    awk -v file="$src" '
      /Function properties for/ { fn = $NF }
      /bytes spill stores/ { spill = $5 }
      /ptxas info *: Used [0-9]+ registers/ {
        regs = $5; smem = 0
        if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH) + 0
        printf "%s\t%s\t%s\t%s\t%s\n", file, fn, regs, smem, spill
      }' | c++filt
done
