// CpuContext: the DeviceContext of CPU layers, a oneDNN engine and stream.
//
// CPU layers receive a DeviceContext& and reach the engine and stream through
// AsCpu(ctx). One context per model replica; like the layers using it, it is
// used by one thread at a time. It also owns the user-mode scratchpad every
// primitive of the replica shares (primitives run one at a time).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "device/device_context.h"
#include "glog/logging.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain::cpu {

class CpuContext final : public DeviceContext {
 public:
  // Throws dnnl::error when oneDNN cannot create a CPU engine.
  CpuContext();
  ~CpuContext() override;

  Device device() const override { return Device::Cpu(); }
  void Synchronize() override { stream_.wait(); }
  // Both on oneDNN primitives (reorder, sum), cached per layout pair / size.
  void Convert(const Tensor& src, const Tensor& dst) override;
  void Accumulate(const Tensor& sum, const Tensor& addend) override;

  const dnnl::engine& engine() const { return engine_; }
  dnnl::stream& stream() { return stream_; }

  // A memory of `desc` over the shared scratchpad, which grows to the largest
  // request and is then reused. Valid until the next call.
  dnnl::memory Scratchpad(const dnnl::memory::desc& desc);
  // Staging slot `slot` (>= 0) of at least `bytes`, shared by every layer of
  // this context (Conversion's shared slots): it grows to the largest
  // request and keeps its contents otherwise; uninitialised when it grows.
  void* Staging(int slot, size_t bytes);

 private:
  struct Cached;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::shared_ptr<Buffer> scratchpad_;
  std::vector<std::shared_ptr<Buffer>> staging_;  // [slot]
  std::unique_ptr<Cached> cached_;                // Convert's reorders, Accumulate's sums
};

// The CpuContext behind `ctx`; CHECK-fails when `ctx` is for another device.
inline CpuContext& AsCpu(DeviceContext& ctx) {
  CHECK(ctx.device().kind == DeviceKind::kCpu) << "CPU layer run with a " << ctx.device().ToString() << " context";
  return static_cast<CpuContext&>(ctx);
}

}  // namespace pstrain::cpu
