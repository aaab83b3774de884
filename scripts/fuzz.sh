#!/usr/bin/env bash
# Fuzzes every file reader longer than CI does (tests/fuzz/: .npy, .safetensors, CSV, run config):
#
#   scripts/fuzz.sh [SECONDS] [OUT_DIR]     default 600 s per target, as many at once as cores
#
# Builds the fuzz preset first (scripts/setup.sh fuzz). Unlike the ctest runs, which stop at the
# first finding, each target keeps going after a crash, timeout or out-of-memory input (libFuzzer's
# fork mode), so one run collects every distinct finding. Everything lands in OUT_DIR (default
# build/fuzz/findings/DATE): TARGET/crashes/ (the inputs: crash-*, leak-*, timeout-*, oom-*),
# TARGET/corpus/ (the inputs that reached new code) and TARGET.log. The script names OUT_DIR and
# every finding at the end, and exits non-zero when there is one. To keep a finding as a
# regression input, copy it to tests/fuzz/regressions/TARGET/ with a name that says what breaks.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-600}
out=${2:-build/fuzz/findings/$(date +%Y%m%d-%H%M%S)}
targets=(npy safetensors csv config)
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 2; }

scripts/setup.sh fuzz
mkdir -p "$out"
out=$(cd "$out" && pwd)
echo "[fuzz] ${#targets[@]} targets, ${seconds} s each, $(nproc) at a time; findings go to $out"

run_one() {
  local t=$1
  tests/fuzz/run_fuzzer.sh "build/fuzz/tests/fuzz/fuzz_$t" "$seconds" "$out/$t" "tests/fuzz/corpus/$t" \
    -- -dict="tests/fuzz/dict/$t.dict" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 >"$out/$t.log" 2>&1 || true
  echo "[fuzz] $t done: $(find "$out/$t/crashes" -type f | wc -l) finding(s)"
}

# One libFuzzer process per core; a new one starts as soon as one ends.
running=0
for t in "${targets[@]}"; do
  if ((running >= $(nproc))); then
    wait -n
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
wait

findings=$(find "$out" -path '*/crashes/*' -type f | sort)
if [ -n "$findings" ]; then
  echo "[fuzz] findings (reproduce with build/fuzz/tests/fuzz/fuzz_TARGET FILE):"
  echo "$findings" | sed 's/^/  /'
  exit 1
fi
echo "[fuzz] no findings in $out"
