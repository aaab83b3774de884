#!/usr/bin/env bash
# scripts/emucc.sh compiles a standalone CUDA program for the emulated GPUs, and the program's
# counters are those derived by hand: 100 floats, warps of 32, 32, 32 and 4 lanes; the load and
# the store each touch 4 + 4 + 4 + 1 sectors (floats 96..99 are bytes 384..399: one sector).
# usage: emucc_test.sh SOURCE_ROOT BUILD_DIR
set -euo pipefail
root="$1"
export EMUCC_BUILD_DIR="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$root/scripts/emucc.sh" "$root/tests/cuda_emu/emucc_program.cu" -o "$work/program"
MINITRAIN_EMU_COUNTERS="$work/counters.jsonl" "$work/program"
line="$(cat "$work/counters.jsonl")"
echo "$line"
for want in '"kernel":"twice"' '"global_load_requests":4,' '"global_load_sectors":13,' \
            '"global_store_requests":4,' '"global_store_sectors":13,' '"warps_launched":4,' \
            '"active_lanes_mean":25.0000'; do
  if [[ "$line" != *"$want"* ]]; then
    echo "emucc_test.sh: expected $want in the counters" >&2
    exit 1
  fi
done
