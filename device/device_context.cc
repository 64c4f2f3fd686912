#include "device/device_context.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "device/cpu/cpu_context.h"
#ifdef PSTRAIN_WITH_CUDA
#include "device/cuda/cuda_context.h"
#endif

namespace pstrain {

int CountDevices(DeviceKind kind) {
  if (kind == DeviceKind::kCpu) return 1;
#ifdef PSTRAIN_WITH_CUDA
  return cuda::DeviceCount();
#else
  return 0;
#endif
}

absl::StatusOr<std::unique_ptr<DeviceContext>> CreateDeviceContext(Device device) {
  if (device.kind == DeviceKind::kCuda) {
#ifdef PSTRAIN_WITH_CUDA
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaContext> ctx, cuda::CudaContext::Create(device.ordinal));
    return std::unique_ptr<DeviceContext>(std::move(ctx));
#else
    return absl::UnimplementedError(absl::StrCat("device ", device.ToString(), ": built without CUDA"));
#endif
  }
  if (device.ordinal != 0) {
    return absl::InvalidArgumentError(absl::StrCat("CPU device ordinal must be 0, got ", device.ordinal));
  }
  try {
    return std::unique_ptr<DeviceContext>(new cpu::CpuContext());
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN CPU engine: ", e.what()));
  }
}

}  // namespace pstrain
