// CudaContext: the DeviceContext of CUDA layers: one GPU, one stream, the
// cuDNN and cuBLAS handles bound to that stream, a caching allocator for
// device memory and one for pinned host memory.
//
// Contracts:
//   * Everything a CUDA layer does is queued on stream(); host code sees the
//     results after Synchronize() (or a Convert() into a host tensor).
//   * Device memory comes from Allocate() / AllocateBytes(): after the first
//     step of a training loop no cudaMalloc or cudaFree happens (blocks return
//     to the cache when their tensors go; one stream keeps reuse ordered).
//   * fp32_math() (device_context.h) is what its convolutions and dense
//     layers use for float32 products; strict unless set.
//   * CUDA tensors are plain (NCHW row-major float32) or, for activations
//     and their gradients in bf16 or fp16 training with
//     PSTRAIN_CUDA_ACTIVATIONS=half, laid out as HalfNhwcLayout
//     (half_nhwc_layout.h): ActivationLayout() says which a layer gives its
//     output. Allocate(), Convert() and Accumulate() take both.
//   * Workspace(bytes): one scratch area shared by the cuDNN/cuBLAS calls of
//     this context (they run one at a time on its stream); it grows to the
//     largest request and is then reused. Valid until the next call.
//   * The context makes its GPU current (cudaSetDevice) on the creating
//     thread; a thread that later uses it calls MakeCurrent() first (the
//     model replicas' threads do, in ReplicaSet).
//   * Used by one thread at a time, like the layers using it.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>

#include "absl/status/statusor.h"
#include "device/caching_allocator.h"
#include "device/cuda/upload_staging.h"
#include "device/device_context.h"
#include "glog/logging.h"

namespace pstrain::cuda {

// Number of usable CUDA devices; 0 when there is no driver or no GPU.
int DeviceCount();
// OK when every usable GPU can run the 16-bit products of `precision`
// (fp16 on tensor cores: compute capability 7.0; bf16: 8.0), or when none is
// usable (creating a context then fails, naming why); FailedPrecondition
// naming the first GPU that cannot.
absl::Status CheckHalfPrecisionSupport(Precision precision);

class CudaContext final : public DeviceContext {
 public:
  // Errors: no such GPU (FailedPrecondition naming how many there are), or
  // the stream / handles cannot be created.
  static absl::StatusOr<std::unique_ptr<CudaContext>> Create(int ordinal);
  ~CudaContext() override;

  Device device() const override { return Device{DeviceKind::kCuda, ordinal_}; }
  void Synchronize() override;
  // Plain tensors: any of device<-device, device<-host, host<-device. From
  // pageable host memory through UploadStaging (upload_staging.h): it
  // returns without waiting for the stream's earlier work.
  // Between plain float32 (on this GPU or the host) and HalfNhwcLayout (on
  // this GPU): rounded or widened, and moved between NCHW and NHWC. A
  // same-layout copy otherwise.
  void Convert(const Tensor& src, const Tensor& dst) override;
  // sum += addend, both plain or both in one HalfNhwcLayout.
  void Accumulate(const Tensor& sum, const Tensor& addend) override;
  // Zero-filled (cudaMemsetAsync on the stream); plain or HalfNhwcLayout.
  Tensor Allocate(const Shape& shape, const TensorLayoutPtr& layout = nullptr) override;

  // The layout the CUDA layers that can give 16-bit channels-last outputs
  // (convolutions without bias, batch norm, relu, add, pooling) give an
  // activation of batched `shape`: HalfNhwcLayout in the precision's 16-bit
  // type when precision() is bf16 or fp16, half_activations() is on and the
  // shape is [N, C, H, W] (image activations: what channels last is for);
  // null (plain float32) otherwise.
  TensorLayoutPtr ActivationLayout(const Shape& shape) const;
  // Whether 16-bit training keeps activations in 16 bits, channels last.
  // Initially the process's PSTRAIN_CUDA_ACTIVATIONS, read once: "float32"
  // (the default: off) or "half"; another value stops the process naming
  // it. Set it, like the precision, before the model's first step.
  bool half_activations() const { return half_activations_; }
  void SetHalfActivations(bool on) { half_activations_ = on; }

  // Raw device bytes (not zeroed) from the caching allocator.
  std::shared_ptr<Buffer> AllocateBytes(size_t bytes);
  // A plain float32 device tensor of `shape` whose bytes are not zeroed:
  // scratch that is written before it is read.
  Tensor AllocateUninitialized(const Shape& shape);
  // Pinned (page-locked) host memory from its own caching allocator, for
  // copies that overlap compute. The tensor is a host tensor, zero-filled.
  Tensor AllocateHost(const Shape& shape) override;

  void MakeCurrent() override;
  // TF32 tensor cores: compute capability 8.0 (Ampere) and newer.
  bool HasTf32() const override { return has_tf32_; }
  MemoryStats memory_stats() const override;
  // Copy streams of its own (CudaCopyEngine, cuda_copy_engine.h).
  std::unique_ptr<CopyEngine> NewCopyEngine() override;
  cudaStream_t stream() const { return stream_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  void* Workspace(size_t bytes);

  CachingAllocator& device_allocator() { return *device_allocator_; }
  CachingAllocator& pinned_allocator() { return *pinned_allocator_; }

 private:
  explicit CudaContext(int ordinal) : ordinal_(ordinal) {}
  // Convert() between plain float32 and a HalfNhwcLayout.
  void ConvertLayout(const Tensor& src, const Tensor& dst);
  const int ordinal_;
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<CachingAllocator> device_allocator_;
  std::unique_ptr<CachingAllocator> pinned_allocator_;
  std::shared_ptr<Buffer> workspace_;
  std::unique_ptr<UploadStaging> upload_staging_;  // after pinned_allocator_: destroyed first
  bool has_tf32_ = false;
  bool half_activations_ = false;
};

// The CudaContext behind `ctx`; CHECK-fails when `ctx` is for another device.
inline CudaContext& AsCuda(DeviceContext& ctx) {
  CHECK(ctx.device().kind == DeviceKind::kCuda) << "CUDA layer run with a " << ctx.device().ToString() << " context";
  return static_cast<CudaContext&>(ctx);
}

// The device pointer of a CUDA tensor (CHECK: plain, on a GPU).
float* DevicePtr(const Tensor& t);
// The device memory of a CUDA tensor that is plain or in a HalfNhwcLayout
// (CHECK: on a GPU, no other layout).
void* ActivationPtr(const Tensor& t);

}  // namespace pstrain::cuda
