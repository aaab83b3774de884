# Runs one case of the broken-kernel table: cmake -DPROGRAM=... -DCASE=... [-DEXPECT=regex] -P run_case.cmake
# With EXPECT (a broken case): the program must exit non-zero and its output (stdout and stderr)
# must match EXPECT. Without (a twin): it must exit 0 and print nothing at all, so no report of
# any kind (sanitizer, device fault, watchdog, wrong answer) gets past.
execute_process(COMMAND ${PROGRAM} ${CASE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(DEFINED EXPECT)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${CASE}: exited 0 where its bug should be caught; output:\n${out}")
  endif()
  if(NOT out MATCHES "${EXPECT}")
    message(FATAL_ERROR "${CASE}: exit ${rc}, but the output does not match\n  ${EXPECT}\noutput:\n${out}")
  endif()
  message(STATUS "${CASE}: caught (exit ${rc})")
else()
  if(NOT rc EQUAL 0 OR NOT out STREQUAL "")
    message(FATAL_ERROR "${CASE}: a correct twin must exit 0 silently; exit ${rc}, output:\n${out}")
  endif()
  message(STATUS "${CASE}: clean")
endif()
