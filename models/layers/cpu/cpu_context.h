// CpuContext: the DeviceContext of CPU layers, a oneDNN engine and stream.
//
// CPU layers receive a DeviceContext& and reach the engine and stream through
// AsCpu(ctx). One context per model replica; like the layers using it, it is
// used by one thread at a time.
#pragma once

#include "glog/logging.h"
#include "models/layers/layer.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain::cpu {

class CpuContext final : public DeviceContext {
 public:
  // Throws dnnl::error when oneDNN cannot create a CPU engine.
  CpuContext() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  Device device() const override { return Device::Cpu(); }
  void Synchronize() override { stream_.wait(); }

  const dnnl::engine& engine() const { return engine_; }
  dnnl::stream& stream() { return stream_; }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
};

// The CpuContext behind `ctx`; CHECK-fails when `ctx` is for another device.
inline CpuContext& AsCpu(DeviceContext& ctx) {
  CHECK(ctx.device().kind == DeviceKind::kCpu) << "CPU layer run with a " << ctx.device().ToString() << " context";
  return static_cast<CpuContext&>(ctx);
}

}  // namespace pstrain::cpu
