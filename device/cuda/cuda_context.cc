#include "device/cuda/cuda_context.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_copy_engine.h"
#include "device/cuda/elementwise.h"
#include "device/cuda/half_nhwc.h"
#include "device/cuda/half_nhwc_layout.h"

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

namespace {

// PSTRAIN_CUDA_ACTIVATIONS, read once: whether 16-bit training keeps
// activations in 16 bits, channels last.
bool HalfActivationsAsked() {
  static const bool half = [] {
    const char* value = std::getenv("PSTRAIN_CUDA_ACTIVATIONS");
    const std::string v = value == nullptr ? "" : value;
    if (v.empty() || v == "float32") return false;
    if (v == "half") return true;
    LOG(FATAL) << "PSTRAIN_CUDA_ACTIVATIONS must be float32 or half, got '" << v << "'";
  }();
  return half;
}

}  // namespace

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
  ctx->half_activations_ = HalfActivationsAsked();

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
  ctx->upload_staging_ = std::make_unique<UploadStaging>(ctx->pinned_allocator_.get());
  return ctx;
}

CudaContext::~CudaContext() {
  if (stream_ != nullptr) {
    cudaSetDevice(ordinal_);
    cudaStreamSynchronize(stream_);
  }
  workspace_.reset();
  upload_staging_.reset();
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
  if (!SameLayout(src.layout(), dst.layout())) {
    ConvertLayout(src, dst);
    return;
  }
  CHECK_EQ(src.num_bytes(), dst.num_bytes());
  if (src.num_bytes() == 0) return;
  if (src.on_host() && !dst.on_host() && IsPageableHostMemory(src.raw())) {
    upload_staging_->Upload(src.raw(), dst.raw(), src.num_bytes(), stream_);
    return;
  }
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.num_bytes(), cudaMemcpyDefault, stream_));
  if (dst.on_host()) Synchronize();  // the contract: host data is there on return
}

void CudaContext::ConvertLayout(const Tensor& src, const Tensor& dst) {
  const HalfNhwcLayout* from = AsHalfNhwc(src.layout());
  const HalfNhwcLayout* to = AsHalfNhwc(dst.layout());
  CHECK((from != nullptr && dst.is_plain()) || (src.is_plain() && to != nullptr))
      << "CUDA Convert: from " << (src.is_plain() ? "plain" : src.layout()->ToString()) << " to "
      << (dst.is_plain() ? "plain" : dst.layout()->ToString())
      << "; only plain float32 and 16-bit channels-last convert into each other";
  // The plain side on the host goes through plain device memory.
  const Tensor& plain = from != nullptr ? dst : src;
  Tensor staged = plain;
  if (plain.on_host()) {
    staged = AllocateUninitialized(plain.shape());
    if (src.on_host()) Convert(src, staged);
  }
  if (from != nullptr) {
    FromHalfNhwc(ActivationPtr(src), DevicePtr(staged), from->extents(), from->type(), stream_);
    if (dst.on_host()) Convert(staged, dst);
  } else {
    ToHalfNhwc(DevicePtr(staged), ActivationPtr(dst), to->extents(), to->type(), stream_);
  }
}

void CudaContext::Accumulate(const Tensor& sum, const Tensor& addend) {
  CHECK(sum.shape() == addend.shape()) << "Accumulate " << ShapeToString(addend.shape()) << " into "
                                       << ShapeToString(sum.shape());
  if (const HalfNhwcLayout* half = AsHalfNhwc(sum.layout())) {
    CHECK(SameLayout(sum.layout(), addend.layout()))
        << "Accumulate " << (addend.is_plain() ? "plain" : addend.layout()->ToString()) << " into " << half->ToString();
    AddHalf(ActivationPtr(sum), ActivationPtr(addend), ActivationPtr(sum), sum.num_elements(), half->type(), stream_);
    return;
  }
  AddInto(DevicePtr(sum), DevicePtr(addend), sum.num_elements(), stream_);
}

Tensor CudaContext::Allocate(const Shape& shape, const TensorLayoutPtr& layout) {
  CHECK(layout == nullptr || AsHalfNhwc(layout) != nullptr)
      << "CUDA tensors are plain or 16-bit channels-last; asked for layout " << layout->ToString();
  const size_t bytes = layout ? layout->num_bytes() : static_cast<size_t>(NumElements(shape)) * sizeof(float);
  std::shared_ptr<Buffer> buffer = AllocateBytes(bytes);
  if (bytes > 0) PSTRAIN_CUDA_CHECK(cudaMemsetAsync(buffer->data(), 0, bytes, stream_));
  return Tensor(shape, DType::kFloat32, std::move(buffer), device(), layout);
}

TensorLayoutPtr CudaContext::ActivationLayout(const Shape& shape) const {
  if (precision() == Precision::kFp32 || !half_activations_ || shape.size() != 4) {
    return nullptr;
  }
  return MakeHalfNhwcLayout(shape, precision() == Precision::kBf16 ? HalfType::kBf16 : HalfType::kFp16);
}

Tensor CudaContext::AllocateUninitialized(const Shape& shape) {
  return Tensor(shape, DType::kFloat32, AllocateBytes(static_cast<size_t>(NumElements(shape)) * sizeof(float)),
                device());
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
  CHECK(t.is_plain()) << "expected a plain CUDA tensor, got one laid out as " << t.layout()->ToString();
  return t.data();
}

void* ActivationPtr(const Tensor& t) {
  CHECK(t.device().kind == DeviceKind::kCuda) << "expected a CUDA tensor, got one on " << t.device().ToString();
  CHECK(t.is_plain() || AsHalfNhwc(t.layout()) != nullptr)
      << "expected a plain or 16-bit channels-last CUDA tensor, got " << t.layout()->ToString();
  return t.raw();
}

}  // namespace pstrain::cuda
