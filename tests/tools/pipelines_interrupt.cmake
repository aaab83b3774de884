# SIGTERM to `minitrain pipelines` stops its running run (terminated) and its queued one (never
# started, and so without a directory); both are recorded as failed, summary.json is still written,
# and the exit status is 1.
# Run with -DMINITRAIN=... -DWORK=...
cmake_policy(SET CMP0054 NEW)  # "failed" is a word here, not a variable
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
file(WRITE "${WORK}/runs.toml" "
[defaults]
data = \"synthetic:256\"
steps = 10000000
device = \"cpu\"
[[run]]
name = \"long\"
[[run]]
name = \"waiting\"
")
# The command in the background, SIGTERM once its first run has logged a step (at most 20 s).
execute_process(
  COMMAND /bin/sh -c "\"$0\" pipelines --config \"$1/runs.toml\" --out \"$1/out\" --cpu-slots 1 --status-every 0.2 > \"$1/stdout\" 2> \"$1/stderr\" &
pid=$!
i=0
while [ ! -s \"$1/out/long/metrics.jsonl\" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done
kill -TERM $pid
wait $pid
echo \"exit=$?\"" "${MINITRAIN}" "${WORK}"
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
file(READ "${WORK}/stdout" run_out)
file(READ "${WORK}/stderr" run_err)
set(shown "${out}${err}\nstdout:\n${run_out}\nstderr:\n${run_err}")
if(NOT out MATCHES "exit=1")
  message(FATAL_ERROR "want exit status 1 after SIGTERM\n${shown}")
endif()
file(READ "${WORK}/out/summary.json" summary)
string(JSON status0 GET "${summary}" runs 0 status)
string(JSON reason0 GET "${summary}" runs 0 reason)
string(JSON exit0 GET "${summary}" runs 0 exit_status)
string(JSON reason1 GET "${summary}" runs 1 reason)
if(NOT status0 STREQUAL "failed" OR NOT reason0 STREQUAL "interrupted" OR NOT exit0 MATCHES "signal 15|exit status")
  message(FATAL_ERROR "run long: ${status0}, ${reason0}, ${exit0}; want failed, interrupted\n${shown}")
endif()
if(NOT reason1 STREQUAL "interrupted before it started")
  message(FATAL_ERROR "run waiting: reason '${reason1}'\n${shown}")
endif()
# Its directory is made when it starts (issue 30): a run that never started leaves nothing.
if(EXISTS "${WORK}/out/waiting")
  message(FATAL_ERROR "run waiting never started but left ${WORK}/out/waiting behind\n${shown}")
endif()
message(STATUS "${run_out}")
