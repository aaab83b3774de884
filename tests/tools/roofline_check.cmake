# `minitrain plot --roofline` as a user runs it, on the committed JSON of `minitrain bench gemm
# --counters --json` (tests/fixtures/roofline/ladder_64.json, made on emulated GPUs): a PNG; two
# files, or a JSON that is not the table, fail naming why. Without a Python that has matplotlib it
# prints "SKIP" (the test is then reported skipped, not passed).
# Run with -DMINITRAIN=... -DFIXTURE=... -DWORK=...
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND ${MINITRAIN} plot --roofline ${FIXTURE} --out ${WORK}/r.png
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(code EQUAL 3 AND "${err}" MATCHES "no Python 3 with matplotlib")
  message("SKIP: ${err}")
  return()
endif()
if(NOT code EQUAL 0 OR NOT out MATCHES "wrote .*r\\.png")
  message(FATAL_ERROR "exit ${code}: ${out}${err}")
endif()
file(READ ${WORK}/r.png signature LIMIT 8 HEX)
file(SIZE ${WORK}/r.png size)
if(NOT signature STREQUAL "89504e470d0a1a0a" OR size LESS 20000)
  message(FATAL_ERROR "r.png is no PNG of a roofline (signature ${signature}, ${size} bytes)")
endif()
execute_process(COMMAND ${MINITRAIN} plot --roofline ${FIXTURE} ${FIXTURE}
  RESULT_VARIABLE code ERROR_VARIABLE err TIMEOUT 60)
if(NOT code EQUAL 2 OR NOT err MATCHES "takes one file")
  message(FATAL_ERROR "two files: exit ${code}: ${err}")
endif()
file(WRITE ${WORK}/metrics.jsonl "{\"step\":1,\"loss\":0.5}\n")
execute_process(COMMAND ${MINITRAIN} plot --roofline ${WORK}/metrics.jsonl --out ${WORK}/x.png
  RESULT_VARIABLE code ERROR_VARIABLE err TIMEOUT 60)
if(code EQUAL 0 OR NOT err MATCHES "is not the JSON of minitrain bench gemm --counters --json")
  message(FATAL_ERROR "a metrics log: exit ${code}: ${err}")
endif()
if(EXISTS ${WORK}/x.png)
  message(FATAL_ERROR "a picture was drawn from a metrics log")
endif()
