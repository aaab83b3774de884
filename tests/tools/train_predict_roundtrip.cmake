# `minitrain train` on a CSV with --config (and a flag over it), --save and --log, then
# `minitrain predict` with the saved weights: both succeed, the log has one line per step, and
# the prediction is a .npy file. Run with -DMINITRAIN=... -DFIXTURES=... -DWORK=...
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "'${ARGN}' failed with ${code}\nstdout: ${out}\nstderr: ${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

run("${MINITRAIN}" train --config "${FIXTURES}/train_small.toml" --steps 12
    --save "${WORK}/w.safetensors" --log "${WORK}/metrics.jsonl")
if(NOT out MATCHES "training mlp:3,16,1 \\(tanh, [0-9]+ parameters\\) on cpu: .*train_small.csv \\(40 rows\\), mse loss, sgd lr 0.05, batch 8, 12 steps")
  message(FATAL_ERROR "the config file's keys (or --steps over its 'epochs') were not used:\n${out}")
endif()
if(NOT err MATCHES "step 12/12 \\(100%\\)  epoch 3  loss ")
  message(FATAL_ERROR "no plain progress lines off a terminal:\n${err}")
endif()
file(STRINGS "${WORK}/metrics.jsonl" lines)
list(LENGTH lines n)
if(NOT n EQUAL 12)
  message(FATAL_ERROR "metrics.jsonl has ${n} lines, want 12")
endif()
list(GET lines 11 last)
if(NOT last MATCHES "^\\{\"step\":12,\"epoch\":3,\"loss\":[0-9]")
  message(FATAL_ERROR "unexpected last metrics line: ${last}")
endif()

run("${MINITRAIN}" predict --weights "${WORK}/w.safetensors" --model mlp:3,16,1 --activation tanh
    --input "${FIXTURES}/f32_2x3.npy" --output "${WORK}/y.npy" --device cpu)
if(NOT out MATCHES "predicted 2 rows")
  message(FATAL_ERROR "unexpected predict output: ${out}")
endif()
file(READ "${WORK}/y.npy" header LIMIT 6 HEX)
if(NOT header STREQUAL "934e554d5059")  # \x93NUMPY
  message(FATAL_ERROR "y.npy is not a .npy file (starts ${header})")
endif()
# The weights say what they are: no --model or --activation, the training table itself as input
# (its target column 'y' left out, as the weights' metadata names it) and a CSV out, whose header
# names the output after that column.
run("${MINITRAIN}" predict --weights "${WORK}/w.safetensors" --input "${FIXTURES}/train_small.csv"
    --output "${WORK}/y.csv" --device cpu)
if(NOT out MATCHES "predicted 40 rows")
  message(FATAL_ERROR "unexpected predict output on the CSV: ${out}")
endif()
file(STRINGS "${WORK}/y.csv" rows)
list(LENGTH rows n)
list(GET rows 0 header)
list(GET rows 1 first)
if(NOT n EQUAL 41 OR NOT header STREQUAL "y" OR NOT first MATCHES "^-?[0-9.e+-]+$")
  message(FATAL_ERROR "y.csv: ${n} lines, header '${header}', first row '${first}'")
endif()
# A flag that contradicts the weights is refused, and says so.
execute_process(COMMAND "${MINITRAIN}" predict --weights "${WORK}/w.safetensors" --activation relu
                        --input "${FIXTURES}/f32_2x3.npy" --output "${WORK}/z.npy" --device cpu
                RESULT_VARIABLE code ERROR_VARIABLE err)
if(code EQUAL 0 OR NOT err MATCHES "--activation relu contradicts the weights: .* was trained as tanh")
  message(FATAL_ERROR "a contradicting --activation was not refused (exit ${code}): ${err}")
endif()
# evaluate: the training table scored with the weights alone (targets from their metadata), one
# JSON line; 12 steps already explain most of the variance (r2 0.89 when written), so r2 must be
# between 0 and 1: a model that knows nothing scores 0 or below.
run("${MINITRAIN}" evaluate --weights "${WORK}/w.safetensors" --data "${FIXTURES}/train_small.csv"
    --device cpu)
if(NOT out MATCHES "^\\{\"rows\":40,\"outputs\":1,\"loss\":[0-9.e-]+,\"mse\":.*\"r2\":0\\.[0-9]+(e-[0-9]+)?,\"loss_name\":\"mse\"\\}\n$")
  message(FATAL_ERROR "unexpected evaluate output: ${out}")
endif()
message(STATUS "train -> predict round trip ok")
