#!/usr/bin/env bash
# One bounded fuzzing run of a minitrain fuzz target, from a fresh scratch corpus:
#   run_fuzzer.sh FUZZER SECONDS WORK_DIR SEED_DIR... [-- EXTRA_LIBFUZZER_FLAGS...]
# New inputs go to WORK_DIR/corpus (emptied first, so every run starts from the seeds alone);
# crashes, leaks, timeouts and out-of-memory inputs to WORK_DIR/crashes/. Exits non-zero when
# the run found something. Used by the fuzz_X.bounded ctests and by scripts/fuzz.sh.
set -euo pipefail
if (($# < 4)); then
  echo "usage: $0 FUZZER SECONDS WORK_DIR SEED_DIR... [-- LIBFUZZER_FLAGS...]" >&2
  exit 2
fi
fuzzer=$1 seconds=$2 work=$3
shift 3
seeds=() extra=()
while (($#)) && [ "$1" != "--" ]; do seeds+=("$1"); shift; done
(($#)) && shift
extra=("$@")

rm -rf "$work/corpus" "$work/tmp"
mkdir -p "$work/corpus" "$work/crashes" "$work/tmp"
# The targets' scratch files (and fork mode's job files) go here; a crash leaves its file behind.
export TMPDIR="$work/tmp"
# The limits match the ctests' (tests/fuzz/CMakeLists.txt): 1 GiB in one allocation or 2 GiB
# resident is a finding, as is one input taking over 10 s.
exec "$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$work/crashes/" ${extra[@]+"${extra[@]}"} \
  "$work/corpus" "${seeds[@]}"
