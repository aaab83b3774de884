# Small helpers shared by every folder's CMakeLists.txt.

# Warnings and (optionally) sanitizers for host C++ code of one target. CUDA sources keep nvcc's
# defaults: host sanitizers do not apply to device code. In emulated builds the kernels are host
# C++, so the sanitizers check them too: address = AddressSanitizer + UBSan (out-of-bounds,
# use-after-free, misaligned vector loads; any report stops the program), thread =
# ThreadSanitizer (races between GPU threads, blocks and streams; cuda_emu/src/sanitizer.h).
function(minitrain_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unknown-pragmas>)
  # Note [unity builds] (cmake/MinitrainUnity.cmake): in a batch every file but the batch's own is
  # an included one, and GCC warns about a lambda that captures an anonymous-namespace type in an
  # included file's template (the warning is meant for headers); release and cpu keep the check.
  target_compile_options(${target} PRIVATE
    $<$<AND:$<COMPILE_LANG_AND_ID:CXX,GNU>,$<BOOL:$<TARGET_PROPERTY:UNITY_BUILD>>>:-Wno-subobject-linkage>)
  minitrain_target_sanitizer(${target})
endfunction()

function(minitrain_target_sanitizer target)
  set(flags)
  if(MINITRAIN_SANITIZER STREQUAL "address" OR MINITRAIN_SANITIZE)
    set(flags -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
    # Emulated builds: an access that fails ASan's inline check calls a report function that
    # returns (`_noabort`), which the emulator defines, so that its checkers see every kernel
    # access while one is on (Note [accesses routed to the checkers], cuda_emu/src/routed_memory.h).
    # Every file, not only kernels: an inline function shared with a kernel file may be the copy
    # the linker keeps. A genuine error still ends the program (libasan's halt_on_error).
    if(MINITRAIN_CUDA_EMULATED)
      list(APPEND flags -fsanitize-recover=address)
    endif()
  elseif(MINITRAIN_SANITIZER STREQUAL "thread")
    set(flags -fsanitize=thread -fno-omit-frame-pointer)
  elseif(NOT MINITRAIN_SANITIZER STREQUAL "")
    message(FATAL_ERROR "MINITRAIN_SANITIZER is '${MINITRAIN_SANITIZER}'; expected address, thread or empty")
  endif()
  if(flags)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${flags}>)
    target_link_options(${target} PUBLIC ${flags})
  endif()
endfunction()

# Emulated builds: each .cu file is rewritten into host C++ (cuda_emu/rewrite_cuda.py: the launch
# syntax and __shared__ declarations) under the build tree, then compiled like any .cpp with
# <cuda_runtime.h> force-included, as nvcc does. The mirror folder comes first on the include
# path so that rewritten .cuh headers shadow the originals.
function(minitrain_emulated_sources out_var)
  set(out)
  set(mirror ${PROJECT_BINARY_DIR}/cuda_emu_src)
  foreach(src IN LISTS ARGN)
    if(src MATCHES "\\.cu$")
      file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${src})
      set(generated ${mirror}/${rel}.cpp)
      string(MAKE_C_IDENTIFIER ${rel} dep_name)
      add_custom_command(
        OUTPUT ${generated}
        COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/cuda_emu/rewrite_cuda.py
                ${PROJECT_SOURCE_DIR} ${rel} ${mirror} ${mirror}/${dep_name}.d ${generated}
        DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${src} ${PROJECT_SOURCE_DIR}/cuda_emu/rewrite_cuda.py
        DEPFILE ${mirror}/${dep_name}.d
        COMMENT "Rewriting ${rel} for the emulated GPU"
        VERBATIM)
      set(options -include cuda_runtime.h)
      set_source_files_properties(${generated} PROPERTIES COMPILE_OPTIONS "${options}")
      list(APPEND out ${generated})
    else()
      list(APPEND out ${src})
    endif()
  endforeach()
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()

# minitrain_add_library(NAME SOURCES a.cpp ... CUDA_SOURCES k.cu ... VENDOR_SOURCES v.cpp ... LIBS dep ...)
# One library per folder; LIBS encodes the layering (a folder links only the folders below it).
# CUDA_SOURCES: the CUDA runtime and kernels, built for real GPUs and for the emulated ones.
# VENDOR_SOURCES: code on cuBLAS, cuBLASLt, cuDNN or NCCL, built for real GPUs only.
function(minitrain_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;CUDA_SOURCES;VENDOR_SOURCES;LIBS" ${ARGN})
  set(sources ${ARG_SOURCES})
  if(MINITRAIN_CUDA_EMULATED)
    minitrain_emulated_sources(emulated ${ARG_CUDA_SOURCES})
    list(APPEND sources ${emulated})
  elseif(MINITRAIN_WITH_CUDA)
    list(APPEND sources ${ARG_CUDA_SOURCES} ${ARG_VENDOR_SOURCES})
  endif()
  # Static unless BUILD_SHARED_LIBS is ON.
  add_library(${name} ${sources})
  if(MINITRAIN_CUDA_EMULATED)
    target_include_directories(${name} BEFORE PUBLIC $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/cuda_emu_src>)
  endif()
  # Built: the source tree ("core/tensor.h"); installed: PREFIX/include/minitrain, same paths.
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                            $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/minitrain>)
  target_compile_features(${name} PUBLIC cxx_std_17)
  # minitrain::core for minitrain_core, the same name as the installed package gives it.
  string(REGEX REPLACE "^minitrain_" "" short ${name})
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${short})
  add_library(minitrain::${short} ALIAS ${name})
  set_property(GLOBAL APPEND PROPERTY MINITRAIN_LIBRARIES ${name})  # installed by cmake/MinitrainInstall.cmake
  target_link_libraries(${name} PUBLIC ${ARG_LIBS})
  minitrain_target_defaults(${name})
  if(MINITRAIN_WITH_CUDA AND NOT MINITRAIN_CUDA_EMULATED)
    set_target_properties(${name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF
                                             POSITION_INDEPENDENT_CODE ON)
  endif()
endfunction()

# Note [gpu label]: every ctest entry is labelled `cpu` or `gpu` (the fuzz targets: `fuzz`) by
# minitrain_label_tests (below), the one place a label is set; tests/CMakeLists.txt refuses an
# add_test entry without one. A gpu case needs a GPU (real or emulated) and reports GTEST_SKIP
# (counted as skipped, never as passed) on a machine without one.
#
# A GoogleTest case declares that it needs a GPU in its name, by one of two markers that exist
# for nothing else: its suite's name begins or ends with "Cuda" (CudaGemmLadder, GemmCuda), or it
# is the CUDA instance of a device-parameterised suite (".../cuda", ".../cuda_tf32", from
# MT_INSTANTIATE_DEVICE_TEST_SUITE and device_param_name). A "Cuda" elsewhere in a name
# (Launcher.DevicesBecomeCudaVisibleDevices) marks nothing. The label is checked where the case
# runs (tests/support/test_util.cpp reads MINITRAIN_TEST_LABEL): a `cpu` case that skips for want
# of a GPU fails, and so does a `gpu` case that passes on a machine without any GPU.
set(MINITRAIN_GPU_CASES "Cuda*:*/Cuda*:*Cuda.*:*/cuda*")

# minitrain_label_tests(cpu|gpu|fuzz TEST ...): the ctest label of these entries, and the environment
# variable MINITRAIN_TEST_LABEL their programs check it by (appended: the entries keep their own
# ENVIRONMENT, so call this after any set_tests_properties(... ENVIRONMENT ...) of theirs).
function(minitrain_label_tests label)
  if(NOT label MATCHES "^(cpu|gpu|fuzz)$")
    message(FATAL_ERROR "minitrain_label_tests: label '${label}' is not cpu, gpu or fuzz")
  endif()
  set_property(TEST ${ARGN} APPEND PROPERTY LABELS ${label})
  set_property(TEST ${ARGN} APPEND PROPERTY ENVIRONMENT MINITRAIN_TEST_LABEL=${label})
  set_property(GLOBAL APPEND PROPERTY MINITRAIN_LABELLED_TESTS ${ARGN})  # for tests/CMakeLists.txt's check
endfunction()

# Note [gpu tests only]: the emu presets run only `gpu` cases (their test presets filter on the
# label), yet compiling every test file under the sanitizers was about half of their build: 65 of
# the suite's 113 test files hold no gpu case. With MINITRAIN_GPU_TESTS_ONLY=ON a test program is
# built from its files that may hold one (a file that mentions Cuda/cuda/CUDA or
# MT_INSTANTIATE_DEVICE_TEST_SUITE anywhere: a marker of Note [gpu label] cannot appear without
# one of them) and from the files that declare no case at all (helpers); the rest are left out. Conservative by construction, and scripts/test.sh checks it:
# every gpu case the release build registers must also be registered by the emu build.
function(minitrain_sources_with_gpu_cases out_var)
  set(kept "")
  foreach(src IN LISTS ARGN)
    get_filename_component(path "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    file(READ "${path}" text)
    string(REGEX MATCH "(^|\n)(TEST|TEST_F|TEST_P|TYPED_TEST)\\(" declares_cases "${text}")
    string(REGEX MATCH "Cuda|cuda|CUDA|MT_INSTANTIATE_DEVICE_TEST_SUITE" mentions_cuda "${text}")
    if(NOT declares_cases OR mentions_cuda)
      list(APPEND kept "${src}")
    endif()
  endforeach()
  if(NOT kept)  # a program with no gpu case at all still builds (and registers no case)
    set(kept "${PROJECT_SOURCE_DIR}/tests/support/no_cases.cpp")
  endif()
  set(${out_var} "${kept}" PARENT_SCOPE)
endfunction()

# Note [test compile time] (below): test files build at -O1 where the rest is optimised further.
function(minitrain_test_optimisation target)
  if(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O1>)
  endif()
endfunction()

# minitrain_add_test(NAME SOURCES a_test.cpp ... LIBS dep ...)
# Registers each GoogleTest case with ctest, labelled by the markers of Note [gpu label].
function(minitrain_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  set(sources ${ARG_SOURCES})
  if(MINITRAIN_GPU_TESTS_ONLY)
    minitrain_sources_with_gpu_cases(sources ${sources})
  endif()
  if(MINITRAIN_CUDA_EMULATED)
    minitrain_emulated_sources(sources ${sources})
  endif()
  add_executable(${name} ${sources})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} minitrain_test_support GTest::gtest_main)
  minitrain_target_defaults(${name})
  # Note [test compile time]: the suite's ~110 test files were half of CI's compile time, each
  # parsing GoogleTest's and minitrain's headers (about 40% of a file's time) and optimising its
  # test bodies at -O3 (most of the rest). The test programs therefore precompile the headers
  # every test file includes, and their own files build at -O1: they check and compare, while the
  # code they test is the libraries', built as configured. One small target,
  # minitrain_test_pch, makes the precompiled header with the test programs' own flags, and every
  # test program reuses it (REUSE_FROM): their files are compiled with the same definitions and
  # options and differ only in include paths, which GCC does not hold against a precompiled header
  # (one header per build instead of 16 to 18, about 2.4 s of compiler time each). A test program
  # then waits for that target only. MINITRAIN_FAST_TEST_BUILD=OFF builds them as everything else.
  if(MINITRAIN_FAST_TEST_BUILD)
    if(NOT TARGET minitrain_test_pch)
      add_library(minitrain_test_pch OBJECT ${PROJECT_SOURCE_DIR}/tests/support/no_cases.cpp)
      target_link_libraries(minitrain_test_pch PRIVATE minitrain_test_support GTest::gtest_main)
      minitrain_target_defaults(minitrain_test_pch)
      target_precompile_headers(minitrain_test_pch PRIVATE <gtest/gtest.h> <functional> <string>
                                <vector> ${PROJECT_SOURCE_DIR}/core/tensor.h
                                ${PROJECT_SOURCE_DIR}/tests/support/test_util.h)
      minitrain_test_optimisation(minitrain_test_pch)
    endif()
    target_precompile_headers(${name} REUSE_FROM minitrain_test_pch)
    minitrain_test_optimisation(${name})
    foreach(src IN LISTS sources)  # the .cu files: nvcc, or force-included cuda_runtime.h
      if(src MATCHES "\\.cu(\\.cpp)?$")
        set_source_files_properties(${src} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endforeach()
  endif()
  # Discovered cases get their properties at test time (PRE_TEST), so they are given here rather
  # than through minitrain_label_tests; the two set the same pair.
  gtest_discover_tests(${name}
    TEST_FILTER "-${MINITRAIN_GPU_CASES}"
    PROPERTIES LABELS cpu ENVIRONMENT MINITRAIN_TEST_LABEL=cpu
    DISCOVERY_MODE PRE_TEST)
  gtest_discover_tests(${name}
    TEST_FILTER "${MINITRAIN_GPU_CASES}"
    PROPERTIES LABELS gpu ENVIRONMENT MINITRAIN_TEST_LABEL=gpu
    DISCOVERY_MODE PRE_TEST)
endfunction()

# minitrain_add_bench(NAME SOURCES a_bench.cpp ... LIBS dep ...)
function(minitrain_add_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} benchmark::benchmark)
  minitrain_target_defaults(${name})
endfunction()
