# Finds NCCL (header nccl.h, library libnccl) under NCCL_ROOT (CMake or environment variable; e.g. the
# nvidia-nccl wheel's folder, which ships only libnccl.so.2), in the CUDA toolkit or the system.
# Defines NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY and the imported target NCCL::nccl.
set(_dcp_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT})
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${_dcp_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
  HINTS ${_dcp_nccl_hints} ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu
  PATH_SUFFIXES lib lib64)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL DEFAULT_MSG NCCL_INCLUDE_DIR NCCL_LIBRARY)
if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION ${NCCL_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
