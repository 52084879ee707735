# CUDA toolkit and NCCL detection for the NCCL backend.
#   SYNK_WITH_NCCL=AUTO  use them when both are found (this is the default)
#   SYNK_WITH_NCCL=ON    fail the configure when either is missing
#   SYNK_WITH_NCCL=OFF   never look
# Output: SYNK_HAVE_NCCL (ON/OFF) and, when ON, the INTERFACE target synk_cuda_deps
# (libcudart and libnccl, linked dynamically).
set(SYNK_HAVE_NCCL OFF)
string(TOUPPER "${SYNK_WITH_NCCL}" _synk_nccl_mode)
if(NOT _synk_nccl_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "SYNK_WITH_NCCL must be AUTO, ON or OFF, not '${SYNK_WITH_NCCL}'")
endif()

if(NOT _synk_nccl_mode STREQUAL "OFF")
  if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  set(_synk_nccl_hint ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_ROOT} $ENV{NCCL_HOME} /usr/local/cuda)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_synk_nccl_hint} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${_synk_nccl_hint} PATH_SUFFIXES lib64 lib)
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _synk_nccl_ver REGEX "#define NCCL_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*NCCL_MINOR ([0-9]+).*NCCL_PATCH ([0-9]+).*"
                         "\\1.\\2.\\3" NCCL_VERSION "${_synk_nccl_ver}")
    message(STATUS "Found CUDA ${CUDAToolkit_VERSION}: ${CUDAToolkit_BIN_DIR}")
    message(STATUS "Found NCCL ${NCCL_VERSION}: ${NCCL_LIBRARY}")
    set(SYNK_HAVE_NCCL ON)
    add_library(synk_cuda_deps INTERFACE)
    target_include_directories(synk_cuda_deps INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(synk_cuda_deps INTERFACE CUDA::cudart ${NCCL_LIBRARY})
  elseif(_synk_nccl_mode STREQUAL "ON")
    message(FATAL_ERROR "SYNK_WITH_NCCL=ON but the CUDA toolkit (found: ${CUDAToolkit_FOUND}) or NCCL "
                        "(nccl.h: ${NCCL_INCLUDE_DIR}, libnccl: ${NCCL_LIBRARY}) is missing. "
                        "Set CUDAToolkit_ROOT / NCCL_HOME, or configure with -DSYNK_WITH_NCCL=OFF.")
  else()
    message(STATUS "CUDA/NCCL not found: building without the NCCL backend")
  endif()
endif()
