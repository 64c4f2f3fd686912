#include "device/device_registry.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/config_checks.h"
#include "common/status_macros.h"

namespace pstrain {

Registry<DeviceEntry>& DeviceRegistry() {
  static auto* registry = new Registry<DeviceEntry>("device");
  return *registry;
}

absl::StatusOr<DeviceKind> DeviceKindOf(absl::string_view name) {
  PSTRAIN_ASSIGN_OR_RETURN(const DeviceEntry entry, DeviceRegistry().Find(name));
  return entry.kind;
}

absl::Status CheckDevicePresent(absl::string_view name) {
  const absl::StatusOr<DeviceEntry> entry = DeviceRegistry().Find(name);
  if (!entry.ok() || !entry->present) return absl::OkStatus();
  const absl::Status present = entry->present();
  if (present.ok()) return present;
  return absl::Status(present.code(), absl::StrCat("device ", name, ": ", present.message()));
}

namespace {

// device: a registered device; local_parameter_device: one that holds
// variables, and a GPU only when the replicas are GPUs.
const bool kConfigCheck =
    ConfigCheckRegistry().Register("device", [](const ExperimentConfig& c, const ConfigChecker& ck) {
      PSTRAIN_RETURN_IF_ERROR(ck.Registered("device", c.device(), DeviceRegistry()));
      std::vector<std::string> holders, others;
      for (const std::string& name : DeviceRegistry().Names()) {
        if (DeviceRegistry().Find(name)->holds_variables) holders.push_back(name);
        if (name != c.local_parameter_device()) others.push_back(name);
      }
      const absl::StatusOr<DeviceEntry> device = DeviceRegistry().Find(c.device());
      if (device.ok() && !device->stands_for.empty() && device->stands_for == c.local_parameter_device()) {
        return absl::OkStatus();
      }
      PSTRAIN_RETURN_IF_ERROR(ck.OneOf("local_parameter_device", c.local_parameter_device(), holders));
      if (c.local_parameter_device() != "cpu" && c.local_parameter_device() != c.device()) {
        return ck.Fail("local_parameter_device",
                       absl::StrCat("cpu with device ", absl::StrJoin(others, " or "), " (", c.local_parameter_device(),
                                    " places variables on the replicas' devices; this experiment has none)"),
                       absl::StrCat("'", c.local_parameter_device(), "'"));
      }
      return absl::OkStatus();
    });

}  // namespace
}  // namespace pstrain
