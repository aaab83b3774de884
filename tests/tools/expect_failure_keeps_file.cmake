# Like expect_failure.cmake, and also proves that a failed run leaves an existing output file as
# it was: writes KEEP with known bytes first, runs COMMAND (a ;-list), and passes only if the
# command fails, says EXPECT, and KEEP still holds exactly those bytes. Usage:
#   cmake -DCOMMAND="minitrain;train;--save;w.safetensors;--lr;-1" -DEXPECT="--lr" -DKEEP=w.safetensors -P ...
get_filename_component(dir "${KEEP}" DIRECTORY)
file(MAKE_DIRECTORY "${dir}")
set(precious "precious bytes that a failed run must not replace\n")
file(WRITE "${KEEP}" "${precious}")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 60)
if(code EQUAL 0)
  message(FATAL_ERROR "expected a failure, got exit 0\nstdout: ${out}\nstderr: ${err}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "exit ${code}, but the output does not match '${EXPECT}'\nstdout: ${out}\nstderr: ${err}")
endif()
file(READ "${KEEP}" after)
if(NOT after STREQUAL precious)
  message(FATAL_ERROR "the failed run changed ${KEEP}")
endif()
message(STATUS "exit ${code}, ${KEEP} unchanged: ${err}")
