// The "gpu" device kind of CUDA builds (device/device_registry.h): a
// CudaContext per replica on the visible GPUs, present when at least one is
// usable, computing in fp32, and in bf16 and fp16 where every GPU has the
// tensor cores (cuda::CheckHalfPrecisionSupport). Builds without CUDA
// register the name as unavailable instead (device/no_cuda/).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "device/cuda/cuda_context.h"
#include "device/device_registry.h"

namespace pstrain::cuda {
namespace {

absl::StatusOr<std::unique_ptr<DeviceContext>> Create(int ordinal) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<CudaContext> ctx, CudaContext::Create(ordinal));
  return std::unique_ptr<DeviceContext>(std::move(ctx));
}

absl::Status Present() {
  if (DeviceCount() > 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "no CUDA device is usable on this machine (no NVIDIA GPU, or no driver: nvidia-smi says which); "
      "run it on a GPU machine, or use device cpu");
}

absl::Status Supports(Precision precision) {
  if (precision == Precision::kFp32) return absl::OkStatus();
  return CheckHalfPrecisionSupport(precision);
}

const bool kRegistered =
    DeviceRegistry().Register("gpu", {.summary = "NVIDIA GPUs, through CUDA, cuDNN, cuBLAS and NCCL",
                                      .kind = DeviceKind::kCuda,
                                      .holds_variables = true,
                                      .create = Create,
                                      .stands_for = "",
                                      .present = Present,
                                      .count = DeviceCount,
                                      .supports = Supports,
                                      .mirror_copies = nullptr});

}  // namespace
}  // namespace pstrain::cuda
