#include "device/device_context.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "device/cpu/cpu_context.h"
#include "device/device_registry.h"
#include "oneapi/dnnl/dnnl.hpp"
#ifdef PSTRAIN_WITH_CUDA
#include "device/cuda/cuda_context.h"
#endif

namespace pstrain {
namespace {

// oneDNN's name for an ISA it reports (the ones a bf16 check meets).
std::string IsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "SSE4.1";
    case dnnl::cpu_isa::avx:
      return "AVX";
    case dnnl::cpu_isa::avx2:
      return "AVX2";
    case dnnl::cpu_isa::avx2_vnni:
      return "AVX2 VNNI";
    case dnnl::cpu_isa::avx512_core:
      return "AVX-512";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "AVX-512 VNNI";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "AVX-512 BF16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "AMX";
    default:
      return absl::StrCat("ISA 0x", absl::Hex(static_cast<int>(isa)));
  }
}

}  // namespace

constexpr Precision kPrecisions[] = {Precision::kFp32, Precision::kBf16, Precision::kFp16};

std::vector<std::string> PrecisionNames() {
  std::vector<std::string> names;
  for (Precision p : kPrecisions) names.push_back(PrecisionName(p));
  return names;
}

std::string PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  for (Precision p : kPrecisions) {
    if (name == PrecisionName(p)) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown precision '", name, "': expected one of ", absl::StrJoin(PrecisionNames(), ", ")));
}

absl::Status CheckPrecision(DeviceKind kind, Precision precision) {
  if (precision == Precision::kFp32) return absl::OkStatus();
  if (kind == DeviceKind::kCuda) {
#ifdef PSTRAIN_WITH_CUDA
    return cuda::CheckHalfPrecisionSupport(precision);
#else
    return absl::UnimplementedError(
        absl::StrCat("precision ", PrecisionName(precision), " on GPUs needs a pstrain built with CUDA; use fp32"));
#endif
  }
  if (precision == Precision::kFp16) {
    return absl::UnimplementedError("precision fp16 runs on GPUs only; on the CPU use bf16 or fp32");
  }
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  const auto bits = static_cast<unsigned>(isa), bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  if ((bits & bf16) == bf16) return absl::OkStatus();  // AVX-512 BF16, AMX
  return absl::FailedPreconditionError(absl::StrCat(
      "precision bf16 needs a processor with AVX-512 BF16 or AMX; oneDNN's instruction set here is ", IsaName(isa),
      " (/proc/cpuinfo flags avx512_bf16 or amx_bf16; ONEDNN_MAX_CPU_ISA may lower it); use fp32"));
}

absl::Status DeviceContext::SetPrecision(Precision precision) {
  PSTRAIN_RETURN_IF_ERROR(CheckPrecision(device().kind, precision));
  precision_ = precision;
  return absl::OkStatus();
}

int CountDevices(DeviceKind kind) {
  if (kind == DeviceKind::kCpu) return 1;
#ifdef PSTRAIN_WITH_CUDA
  return cuda::DeviceCount();
#else
  return 0;
#endif
}

namespace {

absl::StatusOr<std::unique_ptr<DeviceContext>> CreateCpuContext(int ordinal) {
  if (ordinal != 0) return absl::InvalidArgumentError(absl::StrCat("CPU device ordinal must be 0, got ", ordinal));
  try {
    return std::unique_ptr<DeviceContext>(new cpu::CpuContext());
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN CPU engine: ", e.what()));
  }
}

const bool kCpuRegistered =
    DeviceRegistry().Register("cpu", {"the host's cores, through oneDNN", DeviceKind::kCpu, /*holds_variables=*/true,
                                      CreateCpuContext, /*stands_for=*/"", /*present=*/nullptr});

#ifdef PSTRAIN_WITH_CUDA
absl::StatusOr<std::unique_ptr<DeviceContext>> CreateCudaContext(int ordinal) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaContext> ctx, cuda::CudaContext::Create(ordinal));
  return std::unique_ptr<DeviceContext>(std::move(ctx));
}

absl::Status CudaDevicePresent() {
  if (cuda::DeviceCount() > 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "no CUDA device is usable on this machine (no NVIDIA GPU, or no driver: nvidia-smi says which); "
      "run it on a GPU machine, or use device cpu");
}

const bool kGpuRegistered = DeviceRegistry().Register(
    "gpu", {"NVIDIA GPUs, through CUDA, cuDNN, cuBLAS and NCCL", DeviceKind::kCuda,
            /*holds_variables=*/true, CreateCudaContext, /*stands_for=*/"", CudaDevicePresent});
#else
const bool kGpuUnavailable = DeviceRegistry().RegisterUnavailable(
    "gpu", "this pstrain was built without CUDA: install the CUDA toolkit and configure with -DPSTRAIN_WITH_CUDA=ON");
#endif

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceContext>> CreateDeviceContext(Device device) {
  PSTRAIN_ASSIGN_OR_RETURN(const DeviceEntry entry,
                           DeviceRegistry().Find(device.kind == DeviceKind::kCpu ? "cpu" : "gpu"));
  return entry.create(device.ordinal);
}

}  // namespace pstrain
