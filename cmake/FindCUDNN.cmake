# FindCUDNN: cuDNN ships no CMake config. Looks beside the CUDA toolkit and in the usual prefixes;
# CUDNN_ROOT overrides. Defines CUDNN::cudnn, CUDNN::headers (the headers alone: minitrain opens
# the library at run time, core/vendor/vendor_library.h) and CUDNN_VERSION.
find_path(CUDNN_INCLUDE_DIR cudnn_version.h
  HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
  PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY cudnn
  HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR}
  PATH_SUFFIXES lib64 lib)
if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_lines
       REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +[0-9]+")
  foreach(part MAJOR MINOR PATCHLEVEL)
    string(REGEX MATCH "CUDNN_${part} +([0-9]+)" _m "${_cudnn_lines}")
    set(CUDNN_${part} "${CMAKE_MATCH_1}")
  endforeach()
  set(CUDNN_VERSION "${CUDNN_MAJOR}.${CUDNN_MINOR}.${CUDNN_PATCHLEVEL}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN
  REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR VERSION_VAR CUDNN_VERSION)
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES
    IMPORTED_LOCATION "${CUDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
if(CUDNN_FOUND AND NOT TARGET CUDNN::headers)
  add_library(CUDNN::headers INTERFACE IMPORTED)
  set_target_properties(CUDNN::headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
