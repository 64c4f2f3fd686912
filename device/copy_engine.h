// CopyEngine: the copies between a replica's host mirrors and its device
// that overlap the device's compute (on a GPU, copy streams of their own),
// ordered against that compute as CUDA orders work on streams:
//
//   Download(src, dst, done)  copies device tensor `src` into host tensor
//                             `dst` once the compute queued on the context so
//                             far has written `src`; `done` runs on the
//                             engine's completion thread once `dst` holds it,
//                             downloads completing in the order queued. The
//                             caller's thread does not wait.
//   Upload(src, dst)          copies host tensor `src` into device tensor
//                             `dst`; compute queued on the context after
//                             Upload returns reads `dst` only once the copy
//                             is complete (a GPU's compute stream waits for
//                             the copy's event; the host thread does not).
//                             `src` must not change until Drain.
//   Drain()                   returns once every copy queued so far is
//                             complete and every `done` has returned.
//
// Both tensors of a copy are plain, of equal bytes, and stay alive until
// Drain. A context makes its own (DeviceContext::NewCopyEngine): copies at
// once with Convert (ImmediateCopyEngine, below: the CPU's) or, on a CUDA
// context, on copy streams (device/cuda/cuda_copy_engine.h); emulated
// devices whose copies take time use device/timed_copy_engine.h. Download,
// Upload and Drain are called from the replica's thread (the context's).
#pragma once

#include <functional>
#include <memory>

#include "common/tensor.h"
#include "device/device_context.h"

namespace pstrain {

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  virtual void Download(const Tensor& src, const Tensor& dst, std::function<void()> done) = 0;
  virtual void Upload(const Tensor& src, const Tensor& dst) = 0;
  virtual void Drain() = 0;
};

// Copies at once on the caller's thread with `context.Convert` (which
// outlives it): `done` runs before Download returns; Drain has nothing to
// wait for.
class ImmediateCopyEngine final : public CopyEngine {
 public:
  explicit ImmediateCopyEngine(DeviceContext* context) : context_(context) {}
  void Download(const Tensor& src, const Tensor& dst, std::function<void()> done) override {
    context_->Convert(src, dst);
    done();
  }
  void Upload(const Tensor& src, const Tensor& dst) override { context_->Convert(src, dst); }
  void Drain() override {}

 private:
  DeviceContext* const context_;
};

}  // namespace pstrain
