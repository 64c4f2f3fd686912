#include "device/cuda/cuda_context.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_copy_engine.h"
#include "device/cuda/elementwise.h"

namespace pstrain::cuda {

const char* CublasErrorString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "cuBLAS error";
  }
}

absl::Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

absl::Status CheckHalfPrecisionSupport(Precision precision) {
  const int needed_major = precision == Precision::kBf16 ? 8 : 7;
  for (int d = 0; d < DeviceCount(); ++d) {
    cudaDeviceProp prop{};
    PSTRAIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    if (prop.major >= needed_major) continue;
    return absl::FailedPreconditionError(
        absl::StrCat("precision ", PrecisionName(precision), " needs GPUs of compute capability ", needed_major,
                     ".0 or newer (tensor cores for its 16-bit products); gpu:", d, " (", prop.name, ") is ",
                     prop.major, ".", prop.minor, "; use fp32"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaContext>> CudaContext::Create(int ordinal) {
  const int count = DeviceCount();
  if (count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("gpu:", ordinal, ": no CUDA device is usable (no GPU, or no driver)"));
  }
  if (ordinal < 0 || ordinal >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("gpu:", ordinal, ": this machine has ", count, " CUDA device(s), numbered 0-", count - 1));
  }
  std::unique_ptr<CudaContext> ctx(new CudaContext(ordinal));
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ordinal), "cudaSetDevice"));
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&ctx->stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
  if (cudnnStatus_t st = cudnnCreate(&ctx->cudnn_); st != CUDNN_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cudnnCreate on gpu:", ordinal, ": ", cudnnGetErrorString(st)));
  }
  PSTRAIN_CUDNN_CHECK(cudnnSetStream(ctx->cudnn_, ctx->stream_));
  if (cublasStatus_t st = cublasCreate(&ctx->cublas_); st != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasCreate on gpu:", ordinal, ": ", CublasErrorString(st)));
  }
  PSTRAIN_CUBLAS_CHECK(cublasSetStream(ctx->cublas_, ctx->stream_));
  // The handle's own math mode stays strict: TF32 matmuls are asked for per
  // call (CUBLAS_COMPUTE_32F_FAST_TF32) when fp32_math() allows them.
  PSTRAIN_CUBLAS_CHECK(cublasSetMathMode(ctx->cublas_, CUBLAS_DEFAULT_MATH));
  cudaDeviceProp prop{};
  PSTRAIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  ctx->has_tf32_ = prop.major >= 8;

  ctx->device_allocator_ =
      std::make_unique<CachingAllocator>(CachingAllocator::Backend{absl::StrCat("cudaMalloc on gpu:", ordinal),
                                                                   [ordinal](size_t bytes) -> void* {
                                                                     void* p = nullptr;
                                                                     cudaSetDevice(ordinal);
                                                                     if (cudaMalloc(&p, bytes) != cudaSuccess) {
                                                                       cudaGetLastError();
                                                                       return nullptr;
                                                                     }
                                                                     return p;
                                                                   },
                                                                   [ordinal](void* p) {
                                                                     cudaSetDevice(ordinal);
                                                                     cudaFree(p);
                                                                   }});
  ctx->pinned_allocator_ = std::make_unique<CachingAllocator>(
      CachingAllocator::Backend{absl::StrCat("cudaHostAlloc for gpu:", ordinal),
                                [](size_t bytes) -> void* {
                                  void* p = nullptr;
                                  if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
                                    cudaGetLastError();
                                    return nullptr;
                                  }
                                  return p;
                                },
                                [](void* p) { cudaFreeHost(p); }});
  return ctx;
}

CudaContext::~CudaContext() {
  if (stream_ != nullptr) {
    cudaSetDevice(ordinal_);
    cudaStreamSynchronize(stream_);
  }
  workspace_.reset();
  device_allocator_.reset();
  pinned_allocator_.reset();
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::unique_ptr<CopyEngine> CudaContext::NewCopyEngine() { return std::make_unique<CudaCopyEngine>(this); }

void CudaContext::MakeCurrent() { PSTRAIN_CUDA_CHECK(cudaSetDevice(ordinal_)); }

DeviceContext::MemoryStats CudaContext::memory_stats() const {
  const CachingAllocator::Stats stats = device_allocator_->stats();
  return {static_cast<int64_t>(stats.peak_bytes_in_use), stats.backend_allocs};
}

void CudaContext::Synchronize() { PSTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void CudaContext::Convert(const Tensor& src, const Tensor& dst) {
  CHECK(src.shape() == dst.shape()) << "Convert " << ShapeToString(src.shape()) << " to " << ShapeToString(dst.shape());
  CHECK(src.is_plain() && dst.is_plain()) << "CUDA tensors are plain; Convert got a laid-out tensor";
  CHECK_EQ(src.num_bytes(), dst.num_bytes());
  if (src.num_bytes() == 0) return;
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.num_bytes(), cudaMemcpyDefault, stream_));
  if (dst.on_host()) Synchronize();  // the contract: host data is there on return
}

void CudaContext::Accumulate(const Tensor& sum, const Tensor& addend) {
  CHECK(sum.shape() == addend.shape()) << "Accumulate " << ShapeToString(addend.shape()) << " into "
                                       << ShapeToString(sum.shape());
  AddInto(DevicePtr(sum), DevicePtr(addend), sum.num_elements(), stream_);
}

Tensor CudaContext::Allocate(const Shape& shape, const TensorLayoutPtr& layout) {
  CHECK(layout == nullptr) << "CUDA tensors are plain; asked for layout " << layout->ToString();
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * sizeof(float);
  std::shared_ptr<Buffer> buffer = AllocateBytes(bytes);
  if (bytes > 0) PSTRAIN_CUDA_CHECK(cudaMemsetAsync(buffer->data(), 0, bytes, stream_));
  return Tensor(shape, DType::kFloat32, std::move(buffer), device());
}

std::shared_ptr<Buffer> CudaContext::AllocateBytes(size_t bytes) {
  std::shared_ptr<Buffer> buffer = device_allocator_->Allocate(bytes);
  if (buffer == nullptr) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    const CachingAllocator::Stats s = device_allocator_->stats();
    LOG(FATAL) << "gpu:" << ordinal_ << ": out of device memory allocating " << bytes << " bytes (in use "
               << s.bytes_in_use << ", free " << free_bytes << " of " << total_bytes
               << "); lower train.batch_size_per_device";
  }
  return buffer;
}

Tensor CudaContext::AllocateHost(const Shape& shape) {
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * sizeof(float);
  std::shared_ptr<Buffer> buffer = pinned_allocator_->Allocate(bytes);
  CHECK(buffer != nullptr) << "cudaHostAlloc of " << bytes << " bytes failed";
  if (bytes > 0) std::memset(buffer->data(), 0, bytes);
  return Tensor(shape, DType::kFloat32, std::move(buffer), Device::Cpu());
}

void* CudaContext::Workspace(size_t bytes) {
  if (!workspace_ || workspace_->size() < bytes) {
    workspace_.reset();  // back to the cache first, so it can be reused
    workspace_ = AllocateBytes(bytes);
  }
  return workspace_->data();
}

float* DevicePtr(const Tensor& t) {
  CHECK(t.device().kind == DeviceKind::kCuda) << "expected a CUDA tensor, got one on " << t.device().ToString();
  CHECK(t.is_plain()) << "CUDA tensors are plain";
  return t.data();
}

}  // namespace pstrain::cuda
