// Error checks for CUDA, cuDNN, cuBLAS and NCCL calls.
//
// A failing call inside a training step is a programming error or a broken
// device (out of memory after the caching allocator already released its
// cache, an illegal address): the CHECK variants abort with the call, the
// library's error string and the place. Calls whose failure is expected input
// (no device, wrong ordinal) return a Status instead: see CudaStatus().
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "absl/status/status.h"
#include "glog/logging.h"

namespace pstrain::cuda {

const char* CublasErrorString(cublasStatus_t status);

// OK, or Internal naming `what` and CUDA's error string.
absl::Status CudaStatus(cudaError_t error, const char* what);

}  // namespace pstrain::cuda

#define PSTRAIN_CUDA_CHECK(call)                                                                       \
  do {                                                                                                 \
    cudaError_t pstrain_cuda_err_ = (call);                                                            \
    CHECK(pstrain_cuda_err_ == cudaSuccess) << #call << ": " << cudaGetErrorString(pstrain_cuda_err_); \
  } while (0)

#define PSTRAIN_CUDNN_CHECK(call)                                                                                  \
  do {                                                                                                             \
    cudnnStatus_t pstrain_cudnn_err_ = (call);                                                                     \
    CHECK(pstrain_cudnn_err_ == CUDNN_STATUS_SUCCESS) << #call << ": " << cudnnGetErrorString(pstrain_cudnn_err_); \
  } while (0)

#define PSTRAIN_CUBLAS_CHECK(call)                                                   \
  do {                                                                               \
    cublasStatus_t pstrain_cublas_err_ = (call);                                     \
    CHECK(pstrain_cublas_err_ == CUBLAS_STATUS_SUCCESS)                              \
        << #call << ": " << ::pstrain::cuda::CublasErrorString(pstrain_cublas_err_); \
  } while (0)
