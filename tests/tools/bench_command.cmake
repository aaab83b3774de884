# `minitrain bench` against fake bench programs (shell scripts in WORK/fakebench, found through
# MINITRAIN_BENCH_DIR): the arguments each program gets, that a successful area's JSON lands in
# --out, that a failing program makes the command fail naming it while an earlier result of that
# area stays as it was, that JSON that does not parse fails its area, that no temporary file is
# left behind, and the errors for an area that is not built and for a MINITRAIN_BENCH_DIR that
# does not exist. Usage:
#   cmake -DMINITRAIN=path/to/minitrain -DWORK=scratch/dir -P bench_command.cmake
file(REMOVE_RECURSE "${WORK}")
set(fake "${WORK}/fakebench")
set(out "${WORK}/out")
file(MAKE_DIRECTORY "${fake}" "${out}")

# A program that records its arguments, prints a line and writes one result to --benchmark_out.
file(WRITE "${fake}/minitrain_train_step_bench" [=[#!/bin/sh
echo "$@" > "$(dirname "$0")/train_step_args.txt"
for a in "$@"; do case "$a" in --benchmark_out=*) out="${a#--benchmark_out=}";; esac; done
echo "fake train step bench ran"
printf '{"context": {}, "benchmarks": [{"name": "train_step/sgd/w64/b64/real_time", "run_type": "iteration", "real_time": 5.0, "time_unit": "us", "samples/s": 1.0e6}]}\n' > "$out"
]=])
# One that writes half a file and fails.
file(WRITE "${fake}/minitrain_memory_bench" [=[#!/bin/sh
for a in "$@"; do case "$a" in --benchmark_out=*) out="${a#--benchmark_out=}";; esac; done
printf '{"context": {}, "benchm' > "$out"
echo "fake memory bench fails" >&2
exit 3
]=])
# One that exits 0 but leaves JSON that does not parse.
file(WRITE "${fake}/minitrain_optimizer_bench" [=[#!/bin/sh
for a in "$@"; do case "$a" in --benchmark_out=*) out="${a#--benchmark_out=}";; esac; done
printf '{"context": {}, "benchmarks": [' > "$out"
]=])
file(CHMOD "${fake}/minitrain_train_step_bench" "${fake}/minitrain_memory_bench" "${fake}/minitrain_optimizer_bench"
     PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE)
set(earlier "{\"an earlier memory result\": true}\n")
file(WRITE "${out}/memory.json" "${earlier}")

function(expect what text regex)
  if(NOT "${text}" MATCHES "${regex}")
    message(FATAL_ERROR "${what}: expected to match '${regex}', got:\n${text}")
  endif()
endfunction()

# ---- three areas: one runs, one fails, one writes JSON that does not parse ----
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env "MINITRAIN_BENCH_DIR=${fake}"
          "${MINITRAIN}" bench train-step memory optimizer --quick --filter "w64|w128" --out "${out}"
  RESULT_VARIABLE code OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr TIMEOUT 60)
if(NOT code EQUAL 1)
  message(FATAL_ERROR "expected exit 1 (two areas failed), got ${code}\nstdout: ${stdout}\nstderr: ${stderr}")
endif()
expect("stdout" "${stdout}" "== train-step: .*/minitrain_train_step_bench --benchmark_format=console")
expect("stdout" "${stdout}" "fake train step bench ran")
expect("stdout" "${stdout}" "train-step: 1 result\\(s\\) -> ${out}/train-step.json")
expect("stdout" "${stdout}" "fake memory bench fails")   # the child's stderr is passed through too
expect("stdout" "${stdout}" "draw them .*plot_bench.py ${out}/\\*.json --out ${out}")
expect("stderr" "${stderr}" "minitrain bench: minitrain_memory_bench failed \\(exit status 3\\); ${out}/memory.json left as it was")
expect("stderr" "${stderr}" "minitrain bench: '${out}/\\.optimizer\\.json\\.partial\\.[0-9]+' is not valid JSON .*; ${out}/optimizer.json left as it was")
file(READ "${fake}/train_step_args.txt" args)
expect("arguments" "${args}" "--benchmark_out=${out}/\\.train-step\\.json\\.partial\\.[0-9]+ --benchmark_out_format=json --benchmark_filter=w64\\|w128 --benchmark_min_time=0\\.01")
file(READ "${out}/train-step.json" json)
string(JSON name GET "${json}" benchmarks 0 name)
expect("train-step.json" "${name}" "^train_step/sgd/w64/b64/real_time$")
file(READ "${out}/memory.json" kept)
if(NOT kept STREQUAL earlier)
  message(FATAL_ERROR "the failed memory run replaced ${out}/memory.json:\n${kept}")
endif()
file(GLOB leftovers "${out}/.*")
if(leftovers)
  message(FATAL_ERROR "temporary files left behind: ${leftovers}")
endif()

# ---- --list names each area and whether it is built ----
execute_process(COMMAND ${CMAKE_COMMAND} -E env "MINITRAIN_BENCH_DIR=${fake}" "${MINITRAIN}" bench --list
                RESULT_VARIABLE code OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr TIMEOUT 60)
expect("--list" "${code}" "^0$")
expect("--list" "${stdout}" "bench programs: ${fake} \\(MINITRAIN_BENCH_DIR\\)")
expect("--list" "${stdout}" "\n  train-step +built +one MLP training step")
expect("--list" "${stdout}" "\n  gemm +not built +every GEMM backend")
expect("--list" "${stdout}" "GEMM backends \\(cpu\\):\n  openblas +\\(default\\) OpenBLAS .*\n  eigen +[A-Z].*GEMM backends \\(cuda\\):")

# ---- an area asked for by name that is not built ----
execute_process(COMMAND ${CMAKE_COMMAND} -E env "MINITRAIN_BENCH_DIR=${fake}" "${MINITRAIN}" bench gemm --out "${out}"
                RESULT_VARIABLE code OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr TIMEOUT 60)
expect("not built: exit" "${code}" "^1$")
expect("not built" "${stderr}" "area 'gemm' is not built: no ${fake}/minitrain_gemm_bench; build it \\(ninja minitrain_gemm_bench\\)")

# ---- MINITRAIN_BENCH_DIR that is not a directory ----
execute_process(COMMAND ${CMAKE_COMMAND} -E env "MINITRAIN_BENCH_DIR=${WORK}/nonexistent" "${MINITRAIN}" bench --list
                RESULT_VARIABLE code OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr TIMEOUT 60)
expect("bad MINITRAIN_BENCH_DIR: exit" "${code}" "^1$")
expect("bad MINITRAIN_BENCH_DIR" "${stderr}" "MINITRAIN_BENCH_DIR is '${WORK}/nonexistent', which is not a directory")
message(STATUS "minitrain bench: all checks passed")
