#!/usr/bin/env bash
# racecheck over every kernel test program's gpu cases on the emu build (MINITRAIN_EMU_RACECHECK=1:
# a race is a device fault naming the kernel, both lines and the other thread, and fails the case;
# docs/emulator_checks.md). scripts/test.sh runs it after the emu stage; by hand:
#
#   scripts/racecheck_kernels.sh [BUILD_DIR]            (default build/emu, built by the emu preset)
#   MINITRAIN_RACECHECK_ALL=1 scripts/racecheck_kernels.sh   every gpu case, no filter (~25 min)
#   MINITRAIN_RACECHECK_ALSO='PROGRAM ARGS' scripts/racecheck_kernels.sh   one more command in the
#       same jobs (how the stage is shown to fail: a broken-table race kernel)
#
# The programs' gpu cases run in four jobs, two at a time (-j2 on CI's two cores), the biggest
# program as two gtest shards, with MINITRAIN_TEST_MAX_ELEMENTS=5000: the size loops of the kernel
# tests skip larger tensors (tests/support/test_util.h, over_size_cap), since racecheck costs per
# access and a larger size runs the same code as the odd sizes below it (1, 7, 1000, 1023, 4099:
# several blocks, tails). CASES_LEFT_OUT below: the cases that only repeat, at a fixed large size
# or more times, kernels an odd-size case of the same program runs under racecheck; each with why.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/emu}
dir="$build/tests/kernels"
for program in minitrain_kernels_tests minitrain_fused_kernels_tests minitrain_gemm_ladder_tests; do
  if [ ! -x "$dir/$program" ]; then
    echo "racecheck_kernels: $dir/$program is missing (build the emu preset first)" >&2
    exit 2
  fi
done

# The cases left out, as a gtest negative filter (docs/emulator_checks.md has the measured times).
CASES_LEFT_OUT=(
  # eight host threads each run a reduction of 1 << 20: what it checks is the host's threads and
  # streams; ReduceTest's odd sizes run the same kernels
  'ReduceCuda.ConcurrentThreadsGetTheSameAnswer'
  # the same sum or MSE of (1 << 20) + 3 elements again and again: determinism, not new code
  'Devices/ReduceTest.SameBitsRunAfterRun/cuda'
  'Devices/MseLossTest.ReducedForwardIsBitIdenticalAcrossRunsAndThreadCounts/cuda'
  # the moments of 1 << 20 draws: statistics need the size; the same fill kernels run in
  # RandomTest's other cases on odd sizes
  'Devices/RandomTest.UniformStaysInBoundsWithUniformMoments/cuda'
  'Devices/RandomTest.NormalHasTheRequestedMeanAndStd/cuda'
  # every GEMM ladder rung on ten shapes up to 256 x 512 x 128, and on random floats:
  # MisalignedRowsMatchCublasExactly runs every rung on 31 x 37 x 41 and misaligned rows
  'Ladder/CudaGemmLadder.MatchesCublasExactlyOnSmallIntegers/*'
  'Ladder/CudaGemmLadder.RandomInputsAgreeWithCublasWithinRounding/*'
)

gpu_cases='*Cuda*:*/cuda*'
filter="$gpu_cases"
if [ "${MINITRAIN_RACECHECK_ALL:-0}" != 1 ]; then
  filter="$gpu_cases-$(IFS=:; echo "${CASES_LEFT_OUT[*]}")"
  export MINITRAIN_TEST_MAX_ELEMENTS=5000
fi

# First a race the check must report (the broken table's shared-memory histogram, which gives the
# right answer without racecheck): a build or an environment where racecheck is silently off fails
# here instead of passing everything.
canary="$build/tests/cuda_emu/broken/minitrain_broken_kernels"
canary_output=$(MINITRAIN_EMU_RACECHECK=1 "$canary" shared_histogram 2>&1 || true)
if [ -x "$canary" ] && ! grep -q 'racecheck: ' <<<"$canary_output"; then
  echo "racecheck_kernels: racecheck did not report the broken table's shared_histogram" \
    "(is $build an AddressSanitizer build?)" >&2
  exit 1
fi

# MINITRAIN_RACECHECK_LOGS=DIR keeps each job's output there (with every case's time).
if [ -n "${MINITRAIN_RACECHECK_LOGS:-}" ]; then
  logs=$MINITRAIN_RACECHECK_LOGS
  mkdir -p "$logs"
else
  logs=$(mktemp -d)
  trap 'rm -rf "$logs"' EXIT
fi
# The longest first, so that the two cores stay busy to the end.
jobs=(
  "fused $dir/minitrain_fused_kernels_tests"
  "gemm-ladder $dir/minitrain_gemm_ladder_tests"
  "kernels-0 env GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=0 $dir/minitrain_kernels_tests"
  "kernels-1 env GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=1 $dir/minitrain_kernels_tests"
)
if [ -n "${MINITRAIN_RACECHECK_ALSO:-}" ]; then
  jobs+=("also $MINITRAIN_RACECHECK_ALSO")
fi

# One job: its output into its own log; "PASS name seconds" or "FAIL name seconds" on stdout.
run_job() {
  local name=$1
  shift
  local start=$SECONDS
  local args=()
  [ "$name" != also ] && args=(--gtest_brief=1 "--gtest_filter=$filter")
  if MINITRAIN_EMU_RACECHECK=1 "$@" "${args[@]}" >"$logs/$name.log" 2>&1; then
    echo "PASS $name $((SECONDS - start)) s"
  else
    echo "FAIL $name $((SECONDS - start)) s"
  fi
}
export -f run_job
export filter logs

results=$(printf '%s\n' "${jobs[@]}" | xargs -P 2 -I{} bash -c 'run_job {}')
echo "$results"
status=0
while read -r verdict name _; do
  if [ "$verdict" = FAIL ]; then
    echo "---- racecheck: $name failed; its output:"
    cat "$logs/$name.log"
    status=1
  fi
done <<<"$results"
exit $status
