# Runs COMMAND (a ;-list) and passes only if it exits non-zero AND its output matches EXPECT:
# a failing command must also say why. Usage:
#   cmake -DCOMMAND="minitrain;frobnicate" -DEXPECT="unknown command" -P expect_failure.cmake
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 60)
if(code EQUAL 0)
  message(FATAL_ERROR "expected a failure, got exit 0\nstdout: ${out}\nstderr: ${err}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "exit ${code}, but the output does not match '${EXPECT}'\nstdout: ${out}\nstderr: ${err}")
endif()
message(STATUS "exit ${code}: ${err}")
