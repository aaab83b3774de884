# `minitrain pipelines` with two GPU runs: each is pinned to its own GPU (CUDA_VISIBLE_DEVICES),
# they run at the same time, and each ends with the weights its run gives alone on cuda.
# Emulated GPUs count: the emulator reads CUDA_VISIBLE_DEVICES as the driver does. Skips (and
# fails under MINITRAIN_REQUIRE_GPU=1) where the machine has fewer than two GPUs.
# Run with -DMINITRAIN=... -DFIXTURES=... -DWORK=...
cmake_policy(SET CMP0054 NEW)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND "${MINITRAIN}" info OUTPUT_VARIABLE info ERROR_VARIABLE info_err RESULT_VARIABLE code)
if(NOT info MATCHES "GPUs: ([0-9]+)\n" OR CMAKE_MATCH_1 LESS 2)
  if("$ENV{MINITRAIN_REQUIRE_GPU}" STREQUAL "1")
    message(FATAL_ERROR "MINITRAIN_REQUIRE_GPU=1 but fewer than 2 CUDA devices:\n${info}")
  endif()
  message(STATUS "SKIP: needs 2 CUDA devices:\n${info}")
  return()
endif()

file(WRITE "${WORK}/runs.toml" "[defaults]
model = \"mlp:3,8,1\"
data = \"${FIXTURES}/train_small.csv\"
target-columns = [\"y\"]
batch-size = 8
steps = 25
shuffle = false
device = \"cuda\"
optimizer = \"adam\"
lr = 0.01

[[run]]
name = \"a\"
save = \"${WORK}/a.safetensors\"

[[run]]
name = \"b\"
seed = 7
save = \"${WORK}/b.safetensors\"
")
execute_process(COMMAND "${MINITRAIN}" pipelines --config "${WORK}/runs.toml" --out "${WORK}/out" --status-every 0.05
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
set(shown "stdout:\n${out}\nstderr:\n${err}")
if(NOT code EQUAL 0)
  message(FATAL_ERROR "exit ${code}, want 0\n${shown}")
endif()
if(NOT err MATCHES "\\[a\\] started on cuda:0" OR NOT err MATCHES "\\[b\\] started on cuda:1")
  message(FATAL_ERROR "the two runs were not pinned to cuda:0 and cuda:1\n${shown}")
endif()
file(READ "${WORK}/out/summary.json" summary)
foreach(i 0 1)
  string(JSON state GET "${summary}" runs ${i} status)
  string(JSON start_${i} GET "${summary}" runs ${i} start_time)
  string(JSON end_${i} GET "${summary}" runs ${i} end_time)
  if(NOT state STREQUAL "ok")
    message(FATAL_ERROR "run ${i}: status ${state}\n${summary}")
  endif()
endforeach()
if(start_1 GREATER_EQUAL end_0 OR start_0 GREATER_EQUAL end_1)
  message(FATAL_ERROR "the two GPU runs did not overlap\n${summary}")
endif()

# Each run alone, on the one GPU it sees, saves the same weights (the same kernels in the same
# order: bit for bit).
foreach(run a b)
  set(seed_args)
  if(run STREQUAL "b")
    set(seed_args --seed 7)
  endif()
  execute_process(COMMAND "${MINITRAIN}" train --model mlp:3,8,1 --data "${FIXTURES}/train_small.csv"
                          --target-columns y --batch-size 8 --steps 25 --no-shuffle --device cuda
                          --optimizer adam --lr 0.01 ${seed_args} --progress none --save "${WORK}/${run}_alone.safetensors"
                  RESULT_VARIABLE code OUTPUT_VARIABLE o ERROR_VARIABLE e TIMEOUT 120)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "the lone run ${run} failed (${code}):\n${o}\n${e}")
  endif()
  file(SHA256 "${WORK}/${run}.safetensors" pipelined)
  file(SHA256 "${WORK}/${run}_alone.safetensors" alone)
  if(NOT pipelined STREQUAL alone)
    message(FATAL_ERROR "run ${run}: the pipelined run's weights differ from the same run alone")
  endif()
endforeach()
