# Note [unity builds]: the builds that only check, the `static` preset and scripts/check_cuda12.sh,
# set CMAKE_UNITY_BUILD=ON: CMake compiles each target's C++ files in batches of 8, one compiler
# call per batch, so the headers every file includes (Eigen, the standard library, fmt, CLI11) are
# parsed once per batch instead of once per file (docs/testing.md has the CPU-seconds). The release
# and cpu builds, and the emulated ones, stay one object per file, so that a file that compiles only
# thanks to a neighbour's include is still caught there. CMake leaves out of the batches any file
# with its own compile options or definitions (the emulated builds' rewritten .cu files among them)
# and the CUDA files (CMake 3.25 batches C and C++ only); test programs stay one object per file
# (tests/CMakeLists.txt).
#
# A batch is one translation unit, so two files of one target may not define the same file-local
# name (in an anonymous namespace, or static). The clashes were renamed where the files were free
# (kernels/reduce.cpp kPartialChunk, parallel/launch/supervisor.cpp kChildTick, kChildDrain and
# child_exit_code, kernels/gemm/gemm_cublas_backends.cpp backend_blas_int); the files and targets
# below, which other work was changing, are compiled one object per file instead. A new clash
# shows as a "redefinition" error in these builds only: rename the name, or add the file here.
#
# kernels/loss/pointwise_loss.cpp: kReduceChunk, as in kernels/loss/mse_loss.cpp.
set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/loss/pointwise_loss.cpp
  TARGET_DIRECTORY minitrain_kernels PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
# kernels/op_bench/ops/: one file per op family, each with its own kF (bytes per float32) and
# helpers, and a new family is one more such file: that small target keeps one object per file.
if(TARGET minitrain_op_bench)
  set_target_properties(minitrain_op_bench PROPERTIES UNITY_BUILD OFF)
endif()
# cuda_emu/ (emulated builds): each of the emulator's files keeps its own internal types and
# constants under the same short names (Shadow, Capture, kWarp, ...), and the emulator is being
# extended by other work: it keeps one object per file.
if(TARGET minitrain_cuda_emu)
  set_target_properties(minitrain_cuda_emu PROPERTIES UNITY_BUILD OFF)
endif()
