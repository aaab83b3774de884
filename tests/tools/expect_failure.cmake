# Runs COMMAND (a ;-list) and passes only if it exits non-zero AND its output matches EXPECT: a
# failing command must also say why. With KEEP=FILE it also proves that a failed run leaves an
# existing output file as it was: KEEP is written with known bytes first and must still hold
# exactly them afterwards. Usage:
#   cmake -DCOMMAND="minitrain;frobnicate" -DEXPECT="unknown command" -P expect_failure.cmake
#   cmake -DCOMMAND="minitrain;train;--save;w.safetensors;--lr;-1" -DEXPECT="--lr" -DKEEP=w.safetensors -P ...
set(precious "precious bytes that a failed run must not replace\n")
if(KEEP)
  get_filename_component(dir "${KEEP}" DIRECTORY)
  file(MAKE_DIRECTORY "${dir}")
  file(WRITE "${KEEP}" "${precious}")
endif()
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 60)
if(code EQUAL 0)
  message(FATAL_ERROR "expected a failure, got exit 0\nstdout: ${out}\nstderr: ${err}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "exit ${code}, but the output does not match '${EXPECT}'\nstdout: ${out}\nstderr: ${err}")
endif()
if(KEEP)
  file(READ "${KEEP}" after)
  if(NOT after STREQUAL precious)
    message(FATAL_ERROR "the failed run changed ${KEEP}")
  endif()
endif()
message(STATUS "exit ${code}: ${err}")
