#include "device/device_context.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "device/copy_engine.h"
#include "device/device_registry.h"

namespace pstrain {

std::unique_ptr<CopyEngine> DeviceContext::NewCopyEngine() { return std::make_unique<ImmediateCopyEngine>(this); }

absl::Status CheckPrecision(DeviceKind kind, Precision precision) {
  if (precision == Precision::kFp32) return absl::OkStatus();
  const absl::StatusOr<DeviceEntry> entry = DeviceRegistry().Find(kind == DeviceKind::kCpu ? "cpu" : "gpu");
  if (!entry.ok()) {  // a kind this build lacks
    return absl::UnimplementedError(
        absl::StrCat("precision ", PrecisionName(precision), ": ", entry.status().message()));
  }
  if (!entry->supports) {
    return absl::UnimplementedError(absl::StrCat("precision ", PrecisionName(precision), " is not computed here"));
  }
  return entry->supports(precision);
}

absl::Status DeviceContext::SetPrecision(Precision precision) {
  PSTRAIN_RETURN_IF_ERROR(CheckPrecision(device().kind, precision));
  precision_ = precision;
  return absl::OkStatus();
}

int CountDevices(DeviceKind kind) {
  const absl::StatusOr<DeviceEntry> entry = DeviceRegistry().Find(kind == DeviceKind::kCpu ? "cpu" : "gpu");
  if (!entry.ok()) return 0;
  return entry->count ? entry->count() : 1;
}

absl::StatusOr<std::unique_ptr<DeviceContext>> CreateDeviceContext(Device device) {
  PSTRAIN_ASSIGN_OR_RETURN(const DeviceEntry entry,
                           DeviceRegistry().Find(device.kind == DeviceKind::kCpu ? "cpu" : "gpu"));
  return entry.create(device.ordinal);
}

}  // namespace pstrain
