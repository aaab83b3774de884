# Small helpers shared by every folder's CMakeLists.txt.

# Warnings and (optionally) sanitizers for host C++ code of one target. CUDA sources keep nvcc's
# defaults: host sanitizers do not apply to device code.
function(minitrain_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unknown-pragmas>)
  if(MINITRAIN_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer>)
    target_link_options(${target} PUBLIC -fsanitize=address,undefined)
  endif()
endfunction()

# minitrain_add_library(NAME SOURCES a.cpp ... CUDA_SOURCES k.cu ... LIBS dep ...)
# One library per folder; LIBS encodes the layering (a folder links only the folders below it).
function(minitrain_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;CUDA_SOURCES;LIBS" ${ARGN})
  set(sources ${ARG_SOURCES})
  if(MINITRAIN_WITH_CUDA)
    list(APPEND sources ${ARG_CUDA_SOURCES})
  endif()
  add_library(${name} STATIC ${sources})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_LIBS})
  minitrain_target_defaults(${name})
  if(MINITRAIN_WITH_CUDA)
    set_target_properties(${name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF
                                             POSITION_INDEPENDENT_CODE ON)
  endif()
endfunction()

# minitrain_add_test(NAME SOURCES a_test.cpp ... LIBS dep ...)
# Registers each GoogleTest case with ctest. Note [gpu label]: a case that needs a GPU has "cuda"
# or "Cuda" in its full name (device-parameterised cases end in /cuda); those cases get the ctest
# label `gpu` and report GTEST_SKIP (counted as skipped, never as passed) on a machine without one.
function(minitrain_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} minitrain_test_support GTest::gtest_main)
  minitrain_target_defaults(${name})
  gtest_discover_tests(${name}
    TEST_FILTER "-*cuda*:*Cuda*"
    PROPERTIES LABELS cpu
    DISCOVERY_MODE PRE_TEST)
  gtest_discover_tests(${name}
    TEST_FILTER "*cuda*:*Cuda*"
    PROPERTIES LABELS gpu
    DISCOVERY_MODE PRE_TEST)
endfunction()

# minitrain_add_bench(NAME SOURCES a_bench.cpp ... LIBS dep ...)
function(minitrain_add_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} benchmark::benchmark)
  minitrain_target_defaults(${name})
endfunction()
