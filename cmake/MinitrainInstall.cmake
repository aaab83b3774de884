# cmake --install BUILD --prefix P: the minitrain command (P/bin), the libraries (P/lib), the
# public headers under P/include/minitrain/ (the same paths as in the tree: "core/tensor.h"), a
# relocatable CMake package (P/lib/cmake/minitrain: find_package(minitrain 0.1), then
# minitrain::minitrain or a layer's minitrain::core, minitrain::nn, ...) and P/lib/pkgconfig/minitrain.pc.
# Not for emulated builds: their kernels run on cuda_emu/, which is a test harness, not a product.
include(CMakePackageConfigHelpers)

get_property(minitrain_libraries GLOBAL PROPERTY MINITRAIN_LIBRARIES)
# A shared build (BUILD_SHARED_LIBS=ON): each installed library finds the others beside it, and
# the command finds them in ../lib, wherever the prefix is moved; directories outside the project
# that the build linked from (the CUDA runtime's) are kept.
if(BUILD_SHARED_LIBS)
  set_target_properties(${minitrain_libraries} PROPERTIES INSTALL_RPATH "$ORIGIN"
                        INSTALL_RPATH_USE_LINK_PATH ON)
  set_target_properties(minitrain PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}"
                        INSTALL_RPATH_USE_LINK_PATH ON)
endif()
install(TARGETS ${minitrain_libraries} minitrain_library EXPORT minitrainTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS minitrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# `minitrain plot` finds its script in share/minitrain beside the command (tools/plot_command.cpp).
# `minitrain export --format onnx` finds scripts/export_onnx.py the same way.
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/plot_metrics.py ${PROJECT_SOURCE_DIR}/scripts/plot_roofline.py ${PROJECT_SOURCE_DIR}/scripts/export_onnx.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/minitrain)
foreach(layer core kernels nn optim data parallel train infer tools)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/minitrain
    FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")
endforeach()

set(minitrain_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/minitrain)
install(EXPORT minitrainTargets NAMESPACE minitrain:: DESTINATION ${minitrain_cmake_dir})
# What the installed targets link, for minitrainConfig.cmake's find_dependency calls.
set(MINITRAIN_PACKAGE_WITH_CUDA ${MINITRAIN_WITH_CUDA_LIBS})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/minitrainConfig.cmake.in
  ${PROJECT_BINARY_DIR}/minitrainConfig.cmake INSTALL_DESTINATION ${minitrain_cmake_dir})
# 0.x: a minor version may break the API, so 0.1 accepts 0.1.z only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/minitrainConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/minitrainConfig.cmake
              ${PROJECT_BINARY_DIR}/minitrainConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindCUDNN.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake
        DESTINATION ${minitrain_cmake_dir})

# pkg-config: the libraries in link order (a layer before the layers it uses), then the system
# libraries. The build's own definitions (MINITRAIN_WITH_CUDA, ...) go into Cflags: the headers
# read them.
set(pc_libs "-lminitrain_runs_table -lminitrain_infer -lminitrain_train -lminitrain_parallel -lminitrain_data")
string(APPEND pc_libs " -lminitrain_optim -lminitrain_nn -lminitrain_kernels -lminitrain_core")
# Note [lazy CUDA libraries] (core/CMakeLists.txt): a CUDA build links the CUDA runtime only;
# cuBLAS, cuDNN and NCCL are opened at run time.
set(pc_cuda_libs "")
if(MINITRAIN_WITH_CUDA_LIBS)
  if(CMAKE_CUDA_RUNTIME_LIBRARY STREQUAL "Shared")
    set(pc_cuda_libs "-L${CUDAToolkit_LIBRARY_DIR} -lcudart")
  else()
    set(pc_cuda_libs "-L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt")
  endif()
endif()
set(pc_defines "-DMINITRAIN_WITH_CUDA=$<BOOL:${MINITRAIN_WITH_CUDA}>")
string(APPEND pc_defines " -DMINITRAIN_WITH_CUDA_LIBS=$<BOOL:${MINITRAIN_WITH_CUDA_LIBS}>")
string(APPEND pc_defines " -DMINITRAIN_CUDA_EMULATED=0")
configure_file(${PROJECT_SOURCE_DIR}/cmake/minitrain.pc.in ${PROJECT_BINARY_DIR}/minitrain.pc.in @ONLY)
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/minitrain.pc INPUT ${PROJECT_BINARY_DIR}/minitrain.pc.in)
# minitrain-mpi.pc: the MPI backend (Note [MPI as an opt-in library], parallel/launch/mpi_backend.h).
configure_file(${PROJECT_SOURCE_DIR}/cmake/minitrain-mpi.pc.in ${PROJECT_BINARY_DIR}/minitrain-mpi.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/minitrain.pc ${PROJECT_BINARY_DIR}/minitrain-mpi.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
