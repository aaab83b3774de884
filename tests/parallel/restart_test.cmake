# Restarts of failed jobs with the real binary. Usage:
#   cmake -DMINITRAIN=... -DTOOL=ddp_test_tool -DKILLER=libkill_after_checkpoint.so -DMPIEXEC=mpirun
#         -DWORK=dir -DCASE=name -P restart_test.cmake
# CASE:
#   launch     minitrain launch -n 2 --max-restarts 2: each rank trains 12 steps with a checkpoint
#              every 2; rank 1 is SIGKILLed right after its 2nd checkpoint on the first run only
#              (KILLER, an LD_PRELOAD library); the launcher stops rank 0, restarts both, they
#              resume from their checkpoints, and each rank's final weights are bit-identical to an
#              uninterrupted run's. (CPU ranks of one DDP job need mpirun, so under launch each
#              rank trains a model of its own; the DDP case is supervise_mpirun.)
#   giveup     rank 1 is killed on every run: the launcher gives up after 2 restarts, exit 137.
#   supervise  a script that fails the first time (a marker file) is restarted and succeeds; one
#              that always fails gives up after 2 restarts with its exit code.
#   supervise_mpirun  minitrain supervise --max-restarts 2 -- mpirun -n 2 minitrain train
#              --parallel ddp: rank 0 is SIGKILLed after its 2nd checkpoint on the first run; the
#              restarted job resumes and ends bit-identical to an uninterrupted mpirun run.
set(quiet --progress none)
set(common --model mlp:4,16,16,2 --data synthetic:96 --shuffle --device cpu --optimizer adam --lr 0.01
           --seed 3 --steps 12 --checkpoint-every 2 ${quiet})
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

# run(OUT CODE args...): runs a command; OUT gets stdout and stderr together, CODE the exit code.
function(run out_var code_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 200)
  set(${out_var} "${out}${err}" PARENT_SCOPE)
  set(${code_var} "${code}" PARENT_SCOPE)
endfunction()

function(expect_code out code want)
  if(NOT code STREQUAL want)
    message(FATAL_ERROR "exit ${code}, wanted ${want}:\n${out}")
  endif()
endfunction()

function(expect_match out regex)
  if(NOT out MATCHES "${regex}")
    message(FATAL_ERROR "no match for '${regex}' in:\n${out}")
  endif()
endfunction()

# Bit-identical: every weight equal (atol 0, rtol 0).
function(same_bits got want)
  run(out code ${TOOL} compare ${got} ${want} 0 0)
  expect_code("${out}" "${code}" 0)
  message(STATUS "${out}")
endfunction()

string(REPLACE ";" " " common_line "${common}")  # for sh -c
set(killer ${CMAKE_COMMAND} -E env LD_PRELOAD=${KILLER} MINITRAIN_TEST_KILL_AFTER=2)

if(CASE STREQUAL "launch")
  run(out code ${MINITRAIN} train ${common} --checkpoint-dir ${WORK}/plain --save ${WORK}/plain.safetensors)
  expect_code("${out}" "${code}" 0)
  run(out code ${killer} MINITRAIN_TEST_KILL_RANK=1
      ${MINITRAIN} launch -n 2 --grace 5 --max-restarts 2 --restart-backoff 0.2 --
      sh -c "exec ${MINITRAIN} train ${common_line} --checkpoint-dir ${WORK}/ckpt$RANK --save ${WORK}/w$RANK.safetensors")
  expect_code("${out}" "${code}" 0)
  expect_match("${out}" "minitrain launch: rank 1 \\(pid [0-9]+\\) failed: signal 9")
  expect_match("${out}" "minitrain launch: restart 1 of 2 after rank 1 \\(pid [0-9]+\\) was killed by signal 9 \\(SIGKILL\\); waiting 0.2 s")
  expect_match("${out}" "\\[rank 1\\] restart 1: resuming from ${WORK}/ckpt1/checkpoint.safetensors")
  expect_match("${out}" "\\[rank 1\\] training .*resuming after step 4\n")  # not from scratch
  if(out MATCHES "restart 2 of 2")
    message(FATAL_ERROR "restarted twice:\n${out}")
  endif()
  same_bits(${WORK}/w0.safetensors ${WORK}/plain.safetensors)
  same_bits(${WORK}/w1.safetensors ${WORK}/plain.safetensors)
elseif(CASE STREQUAL "giveup")
  run(out code ${killer} MINITRAIN_TEST_KILL_RANK=1 MINITRAIN_TEST_KILL_ALWAYS=1
      ${MINITRAIN} launch -n 2 --grace 5 --max-restarts 2 --restart-backoff 0 --
      sh -c "exec ${MINITRAIN} train ${common_line} --checkpoint-dir ${WORK}/ckpt$RANK")
  expect_code("${out}" "${code}" 137)
  expect_match("${out}" "restart 2 of 2 after rank 1 \\(pid [0-9]+\\) was killed by signal 9 \\(SIGKILL\\)")
  expect_match("${out}" "giving up after 2 restarts; the last failure: rank 1 \\(pid [0-9]+\\) was killed by signal 9")
  if(out MATCHES "restart 3")
    message(FATAL_ERROR "restarted more than twice:\n${out}")
  endif()
elseif(CASE STREQUAL "supervise")
  run(out code ${MINITRAIN} supervise --max-restarts 2 --restart-backoff 0 --
      sh -c "echo run $MINITRAIN_RESTART_COUNT\ntest -e ${WORK}/marker || exec sh -c 'touch ${WORK}/marker && exit 9'")
  expect_code("${out}" "${code}" 0)
  expect_match("${out}" "run 0\nrun 1\n")
  expect_match("${out}" "minitrain supervise: restart 1 of 2 after the command \\(pid [0-9]+\\) exited with status 9; waiting 0 s")
  run(out code ${MINITRAIN} supervise --max-restarts 2 --restart-backoff 0 -- sh -c "exit 4")
  expect_code("${out}" "${code}" 4)
  expect_match("${out}" "giving up after 2 restarts; the last failure: the command \\(pid [0-9]+\\) exited with status 4")
elseif(CASE STREQUAL "supervise_mpirun")
  set(ddp ${MINITRAIN} train --parallel ddp ${common} --batch-size 4)
  run(out code ${MPIEXEC} -n 2 ${ddp} --checkpoint-dir ${WORK}/plain --save ${WORK}/plain.safetensors)
  expect_code("${out}" "${code}" 0)
  run(out code ${killer} MINITRAIN_TEST_KILL_RANK=0
      ${MINITRAIN} supervise --max-restarts 2 --restart-backoff 0.2 --
      ${MPIEXEC} -n 2 ${ddp} --checkpoint-dir ${WORK}/ckpt --save ${WORK}/ddp.safetensors)
  expect_code("${out}" "${code}" 0)
  expect_match("${out}" "minitrain supervise: restart 1 of 2 after the command \\(pid [0-9]+\\) (exited with status|was killed by signal)")
  expect_match("${out}" "restart 1: resuming from ${WORK}/ckpt/checkpoint.safetensors")
  expect_match("${out}" "training .*resuming after step 4\n")  # not from scratch
  same_bits(${WORK}/ddp.safetensors ${WORK}/plain.safetensors)
else()
  message(FATAL_ERROR "unknown CASE '${CASE}'")
endif()
