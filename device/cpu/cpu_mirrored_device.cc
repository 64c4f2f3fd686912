// The "cpu_mirrored" device kind (device/device_registry.h): CPU replicas
// laid out as GPU replicas are, so the GPU replica path runs, and is tested,
// on any machine: each replica's variables live in memory of its own, the
// strategies exchange host mirrors of them, and the copies in between take
// the time of a PCIe 4.0 x16 link (about 25 GB/s each way, 10 us a copy;
// TimedCopyEngine). It computes as "cpu" does (its contexts are CPU
// contexts), in fp32.
#include "device/device_registry.h"
#include "device/timed_copy_engine.h"

namespace pstrain::cpu {
namespace {

std::unique_ptr<CopyEngine> PcieCopies(DeviceContext&) {
  return std::make_unique<TimedCopyEngine>(TimedCopyEngine::Options{/*gbps=*/200, absl::Microseconds(10)});
}

const bool kRegistered = DeviceRegistry().Register(
    "cpu_mirrored", {.summary = "the host's cores, with variables in memory of their own as a GPU's: host mirrors and "
                                "copies over an emulated PCIe link (the GPU replica path without a GPU)",
                     .kind = DeviceKind::kCpu,
                     .holds_variables = false,
                     .create = nullptr,
                     .stands_for = "",
                     .present = nullptr,
                     .count = nullptr,
                     .supports = nullptr,
                     .mirror_copies = PcieCopies});

}  // namespace
}  // namespace pstrain::cpu
