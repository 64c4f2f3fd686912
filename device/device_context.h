// DeviceContext: the execution state of one device for one model replica
// (oneDNN engine and stream on the CPU; GPU, stream, cuDNN/cuBLAS handles and
// caching allocators on CUDA), and how to create one.
//
// Implementations: device/cpu/cpu_context.h and, in CUDA builds,
// device/cuda/cuda_context.h. Layers, models and the worker's replicas reach
// the device only through this interface (and, inside a device's own layer
// implementations, through AsCpu()/AsCuda()).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tensor.h"
#include "device/precision.h"

namespace pstrain {

class CopyEngine;

// OK when contexts of `kind` can compute in `precision` in this build on
// this machine (fp32 always); otherwise the device entry's reason
// (DeviceEntry::supports): bf16 on the CPU needs AVX-512 BF16 or AMX as
// oneDNN sees them, fp16 a GPU; on GPUs both need a CUDA build and tensor
// cores.
absl::Status CheckPrecision(DeviceKind kind, Precision precision);

// Per-device execution state (oneDNN engine and stream on CPU; handles and a
// stream on CUDA). Owned by whoever runs the model; one per model replica.
class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  virtual Device device() const = 0;
  // The precision of the compute-bound layers run on this context: fp32
  // unless set. Set it before the model's first step (layers choose their
  // primitives' data types on first use); CheckPrecision's error otherwise.
  Precision precision() const { return precision_; }
  absl::Status SetPrecision(Precision precision);
  // How float32 products run on this context (precision.h): what was set
  // (strict unless set) where the device has TF32 (HasTf32), strict
  // elsewhere. Set it before the model's first step, as the precision.
  Fp32Math fp32_math() const { return HasTf32() ? fp32_math_ : Fp32Math::kStrict; }
  void SetFp32Math(Fp32Math math) { fp32_math_ = math; }
  // Whether this device has TF32 tensor cores (GPUs of compute capability
  // 8.0+); false on the CPU.
  virtual bool HasTf32() const { return false; }
  // Blocks until queued work is finished.
  virtual void Synchronize() = 0;
  // Copies src into dst (same shape), converting between their layouts;
  // either may be plain. This is how plain data enters or leaves a layer
  // chain whose activations are blocked. On a non-CPU context either side
  // may also be a plain host tensor: that is how data enters and leaves the
  // device. A copy into a host tensor is complete when Convert() returns.
  virtual void Convert(const Tensor& src, const Tensor& dst) = 0;
  // sum += addend, elementwise; same shape and layout (padding included).
  virtual void Accumulate(const Tensor& sum, const Tensor& addend) = 0;
  // A zero-filled float32 tensor of `shape` on this context's device, laid
  // out as `layout` (null: plain). Activations, gradients and parameters of
  // a model on this device are allocated here.
  virtual Tensor Allocate(const Shape& shape, const TensorLayoutPtr& layout = nullptr) { return Tensor(shape, layout); }
  // A zero-filled plain host tensor suited to fast copies to and from this
  // device (pinned memory for a GPU); an ordinary host tensor on the CPU.
  virtual Tensor AllocateHost(const Shape& shape) { return Tensor(shape); }
  // Makes this context's device current on the calling thread (a GPU
  // context's threads must call it before queuing work); nothing on the CPU.
  virtual void MakeCurrent() {}
  // Device memory this context has used: a GPU context's caching allocator
  // (the most bytes handed out at once, and how many blocks it had to get
  // from cudaMalloc: a training loop stops asking after its first step).
  // All zero on the CPU, whose memory is the process's (PeakRssBytes,
  // common/metrics/memory_usage.h).
  struct MemoryStats {
    int64_t peak_bytes_in_use = 0;
    int64_t backend_allocations = 0;
  };
  virtual MemoryStats memory_stats() const { return {}; }
  // A copy engine for this context's host mirrors (device/copy_engine.h);
  // the context outlives it. Copies made at once with Convert unless the
  // device has copy engines of its own (a GPU's streams).
  virtual std::unique_ptr<CopyEngine> NewCopyEngine();

 private:
  Precision precision_ = Precision::kFp32;
  Fp32Math fp32_math_ = Fp32Math::kStrict;
};

// Creates the context for `device`.
absl::StatusOr<std::unique_ptr<DeviceContext>> CreateDeviceContext(Device device);
// Devices of `kind` this process can use (its entry's count): 1 for the
// CPU; the visible GPUs for CUDA (0 in a build without CUDA, or without a
// GPU or driver).
int CountDevices(DeviceKind kind);

}  // namespace pstrain
