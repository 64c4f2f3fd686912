# Decides PSTRAIN_CUDA_ENABLED from PSTRAIN_WITH_CUDA (AUTO, ON, OFF) and, when
# enabled, defines the imported pieces the CUDA code links:
#   pstrain_cuda_libs  INTERFACE: cudart, cuBLAS, cuDNN, NCCL and the
#                      PSTRAIN_WITH_CUDA=1 definition.
set(PSTRAIN_CUDA_ENABLED OFF)
string(TOUPPER "${PSTRAIN_WITH_CUDA}" _pstrain_cuda_mode)
if(NOT _pstrain_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "PSTRAIN_WITH_CUDA must be AUTO, ON or OFF, not \"${PSTRAIN_WITH_CUDA}\"")
endif()

if(NOT _pstrain_cuda_mode STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(PSTRAIN_CUDA_ENABLED ON)
  elseif(_pstrain_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "PSTRAIN_WITH_CUDA=ON but no CUDA compiler (nvcc) was found; "
                        "install the CUDA toolkit or configure with -DPSTRAIN_WITH_CUDA=OFF")
  endif()
endif()

if(PSTRAIN_CUDA_ENABLED)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # "90" = sm_90 SASS and compute_90 PTX.
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  # Kernels need no more than C++17 (CMake 3.25 does not know nvcc 13 and C++20).
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  # One CUDA runtime in the process: the shared one, as CUDA::cudart links.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # cuDNN and NCCL ship beside the toolkit (or in the system paths).
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  foreach(_v CUDNN_INCLUDE_DIR CUDNN_LIBRARY NCCL_INCLUDE_DIR NCCL_LIBRARY)
    if(NOT ${_v})
      message(FATAL_ERROR "CUDA build: ${_v} not found (cuDNN 9 and NCCL 2 are required beside the toolkit); "
                          "configure with -DPSTRAIN_WITH_CUDA=OFF for a CPU-only build")
    endif()
  endforeach()
  add_library(pstrain_cuda_libs INTERFACE)
  # CMake links CUDA objects with cudadevrt/cudart by name; some toolkit
  # layouts hide their directory from its implicit-directory detection.
  target_link_directories(pstrain_cuda_libs INTERFACE ${CUDAToolkit_LIBRARY_DIR})
  target_include_directories(pstrain_cuda_libs INTERFACE ${CUDNN_INCLUDE_DIR} ${NCCL_INCLUDE_DIR})
  target_link_libraries(pstrain_cuda_libs INTERFACE CUDA::cudart CUDA::cublas ${CUDNN_LIBRARY} ${NCCL_LIBRARY})
  target_compile_definitions(pstrain_cuda_libs INTERFACE PSTRAIN_WITH_CUDA=1)
  message(STATUS "pstrain: CUDA build (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}, "
                 "cuDNN ${CUDNN_LIBRARY}, NCCL ${NCCL_LIBRARY})")
else()
  message(STATUS "pstrain: CPU-only build (PSTRAIN_WITH_CUDA=${PSTRAIN_WITH_CUDA})")
endif()
