// The "cpu" device kind (device/device_registry.h): a CpuContext on oneDNN,
// one per process, computing in fp32 everywhere and in bf16 where the
// processor has AVX-512 BF16 or AMX as oneDNN sees it (its effective ISA,
// which ONEDNN_MAX_CPU_ISA may lower).
#include "absl/strings/str_cat.h"
#include "device/cpu/cpu_context.h"
#include "device/device_registry.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain::cpu {
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

absl::Status Supports(Precision precision) {
  if (precision == Precision::kFp32) return absl::OkStatus();
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

absl::StatusOr<std::unique_ptr<DeviceContext>> Create(int ordinal) {
  if (ordinal != 0) return absl::InvalidArgumentError(absl::StrCat("CPU device ordinal must be 0, got ", ordinal));
  try {
    return std::unique_ptr<DeviceContext>(new CpuContext());
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN CPU engine: ", e.what()));
  }
}

const bool kRegistered = DeviceRegistry().Register("cpu", {.summary = "the host's cores, through oneDNN",
                                                           .kind = DeviceKind::kCpu,
                                                           .holds_variables = true,
                                                           .create = Create,
                                                           .stands_for = "",
                                                           .present = nullptr,
                                                           .count = nullptr,
                                                           .supports = Supports,
                                                           .mirror_copies = nullptr});

}  // namespace
}  // namespace pstrain::cpu
