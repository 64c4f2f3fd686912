#include "worker/emulated_device.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/byte_scale.h"
#include "common/config/config_checks.h"
#include "common/status_macros.h"
#include "device/device_registry.h"
#include "worker/pipeline_tuning.h"

namespace pstrain {
namespace {

std::vector<std::string> ProfileNames() {
  std::vector<std::string> names;
  for (const DeviceProfile& p : DeviceProfiles()) names.push_back(p.name);
  return names;
}

// emulation.topology and collective_compute_share.
absl::Status CheckTopology(const ExperimentConfig& c, const ConfigChecker& ck) {
  const EmulationConfig& e = c.emulation();
  if (e.collective_compute_share() != -1) {
    PSTRAIN_RETURN_IF_ERROR(
        ck.InRange<double>("emulation.collective_compute_share", e.collective_compute_share(), 0, true, 1, false));
  }
  if (e.topology().empty()) {
    if (c.device() == "emulated" && c.local_parameter_device() == "gpu") {
      return ck.Fail("local_parameter_device", "cpu with device emulated unless emulation.topology is set", "'gpu'");
    }
    return absl::OkStatus();
  }
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf("emulation.topology", e.topology(), InterconnectProfileNames()));
  if (c.device() != "emulated") {
    return ck.Fail("emulation.topology", "empty unless device is emulated (real devices move their own bytes)",
                   absl::StrCat("'", e.topology(), "'"));
  }
  const InterconnectProfile* profile = *FindInterconnectProfile(e.topology());
  if (c.devices_per_worker() > profile->devices) {
    return ck.Fail("devices_per_worker",
                   absl::StrCat("at most ", profile->devices, " with emulation.topology ", profile->name),
                   ConfigChecker::Num(c.devices_per_worker()));
  }
  if (e.workers_per_host() != 1) {
    return ck.Fail("emulation.workers_per_host",
                   "1 with emulation.topology (each worker models the interconnect of a host of its own)",
                   ConfigChecker::Num(e.workers_per_host()));
  }
  return absl::OkStatus();
}

// Hosts that run only shards: server_hosts and server_link_gbps.
absl::Status CheckServerHosts(const ExperimentConfig& c, const ConfigChecker& ck) {
  const EmulationConfig& e = c.emulation();
  PSTRAIN_RETURN_IF_ERROR(ck.InRange<double>("emulation.server_link_gbps", e.server_link_gbps(), 0, true, 400, true));
  if (e.server_hosts() == 0) return absl::OkStatus();
  if (e.ps_placement() != EmulationConfig::colocated) {
    return ck.Fail("emulation.server_hosts",
                   "0 unless ps_placement is colocated (separate runs every shard on a host of its own)",
                   ConfigChecker::Num(e.server_hosts()));
  }
  const int shards = c.cluster().ps_hosts_size();
  if (e.server_hosts() < 0 || e.server_hosts() > shards) {
    return ck.Fail("emulation.server_hosts", absl::StrCat("in [0, ", shards, "] (the number of PS shards)"),
                   ConfigChecker::Num(e.server_hosts()));
  }
  return absl::OkStatus();
}

// link_changes: in increasing time, each to a rate tc can set.
absl::Status CheckLinkChanges(const EmulationConfig& e, const ConfigChecker& ck) {
  double previous = 0;
  for (int i = 0; i < e.link_changes_size(); ++i) {
    const EmulationConfig::LinkChange& change = e.link_changes(i);
    const std::string at = absl::StrCat("emulation.link_changes[", i, "]");
    PSTRAIN_RETURN_IF_ERROR(ck.InRange<double>(at + ".gbps", change.gbps(), 0, false, 400, true));
    if (!(change.after_seconds() > previous)) {
      return ck.Fail(at + ".after_seconds",
                     i == 0 ? "> 0" : absl::StrCat("> ", ConfigChecker::Num(previous), " (the change before it)"),
                     ConfigChecker::Num(change.after_seconds()));
    }
    previous = change.after_seconds();
  }
  return absl::OkStatus();
}

// The `emulation:` section and `device: emulated` together.
absl::Status CheckEmulation(const ExperimentConfig& c, const ConfigChecker& ck) {
  const EmulationConfig& e = c.emulation();
  const bool emulated_device = c.device() == "emulated";
  if (!c.has_emulation()) {
    if (emulated_device) {
      return ck.Fail("emulation", "a section with device_profile or images_per_second (device is emulated)", "none");
    }
    return absl::OkStatus();
  }
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("emulation.workers_per_host", e.workers_per_host()));
  PSTRAIN_RETURN_IF_ERROR(ck.InRange<double>("emulation.link_gbps", e.link_gbps(), 0, true, 400, true));
  PSTRAIN_RETURN_IF_ERROR(ck.InRange<double>("emulation.time_scale", e.time_scale(), 1, true, 1000, true));
  PSTRAIN_RETURN_IF_ERROR(ck.InRange<double>("emulation.images_per_second", e.images_per_second(), 0, true, 1e7, true));
  if (!e.device_profile().empty()) {
    PSTRAIN_RETURN_IF_ERROR(ck.OneOf("emulation.device_profile", e.device_profile(), ProfileNames()));
  }
  const bool device_given = !e.device_profile().empty() || e.images_per_second() > 0;
  if (emulated_device && !device_given) {
    return ck.Fail("emulation.device_profile",
                   absl::StrCat("one of ", absl::StrJoin(ProfileNames(), ", "),
                                ", or emulation.images_per_second > 0 (device is emulated)"),
                   "neither");
  }
  if (!emulated_device && device_given) {
    return ck.Fail(e.device_profile().empty() ? "emulation.images_per_second" : "emulation.device_profile",
                   "none unless device is emulated (a real device computes for itself)",
                   absl::StrCat("given with device '", c.device(), "'"));
  }
  if (emulated_device && c.train().eval_every_steps() > 0) {
    return ck.Fail("train.eval_every_steps", "0 with device emulated (an emulated device computes no accuracy)",
                   ConfigChecker::Num(c.train().eval_every_steps()));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckTopology(c, ck));
  PSTRAIN_RETURN_IF_ERROR(CheckServerHosts(c, ck));
  PSTRAIN_RETURN_IF_ERROR(CheckLinkChanges(e, ck));
  if (e.time_scale() != 1 && !emulated_device) {
    return ck.Fail("emulation.time_scale",
                   "1 unless device is emulated (real compute cannot be slowed down to match the links)",
                   ConfigChecker::Num(e.time_scale()));
  }
  return absl::OkStatus();
}

const bool kConfigCheck = ConfigCheckRegistry().Register("emulation", CheckEmulation);

// device: emulated -- real variables on the CPU, modelled step times
// (models/emulated_model.h); it holds no variables of its own, but stands
// for GPUs as local_parameter_device inside an emulated host topology.
const bool kDeviceRegistered = DeviceRegistry().Register(
    "emulated", {.summary = "a device of published throughput, modelled on the CPU (emulation:)",
                 .kind = DeviceKind::kCpu,
                 .holds_variables = false,
                 .create = nullptr,
                 .stands_for = "gpu",
                 .present = nullptr,
                 .count = nullptr,
                 .supports = nullptr,
                 .mirror_copies = nullptr});

}  // namespace

const std::vector<DeviceProfile>& DeviceProfiles() {
  static const auto* profiles = new std::vector<DeviceProfile>{
      {"p100", "resnet50", 221.0,
       "2 NVIDIA Tesla P100 (PCIe) training ResNet-50 at 442 images/sec in fp32, Horovod's and the cloud images' "
       "one-host baseline for the 4 hosts x 2 P100 / 8 Gbps figure (7.3x, 91.2%)"},
  };
  return *profiles;
}

absl::StatusOr<double> EmulatedImagesPerSecond(const ExperimentConfig& config, const std::string& model_name,
                                               int64_t forward_flops) {
  const EmulationConfig& e = config.emulation();
  if (e.images_per_second() > 0) return e.images_per_second();
  for (const DeviceProfile& p : DeviceProfiles()) {
    if (p.name != e.device_profile()) continue;
    // The reference model at its reference shape gets the profile's rate
    // exactly; other models and shapes by their FLOPs.
    if (forward_flops <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("emulation.device_profile ", p.name, ": model ", model_name,
                                                     " counts no FLOPs to scale the profile by; give "
                                                     "emulation.images_per_second"));
    }
    return p.images_per_second * static_cast<double>(kResNet50ForwardFlops) / static_cast<double>(forward_flops);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("emulation: no device profile '", e.device_profile(), "' and no images_per_second"));
}

EmulatedCompute ModelledCompute(const ExperimentConfig& config, double images_per_second) {
  const double step = config.train().batch_size_per_device() / images_per_second * config.emulation().time_scale();
  return EmulatedCompute{absl::Seconds(step / 3), absl::Seconds(step * 2 / 3)};
}

absl::StatusOr<std::shared_ptr<EmulatedInterconnect>> EmulatedHostInterconnect(const ExperimentConfig& config,
                                                                               double byte_scale) {
  const EmulationConfig& e = config.emulation();
  if (!EmulatedTopology(config)) return std::shared_ptr<EmulatedInterconnect>();
  PSTRAIN_ASSIGN_OR_RETURN(const InterconnectProfile* profile, FindInterconnectProfile(e.topology()));
  const double share =
      e.collective_compute_share() >= 0 ? e.collective_compute_share() : profile->collective_compute_share;
  // Copies move 1/byte_scale of their bytes, as much slower as links.
  return std::make_shared<EmulatedInterconnect>(*profile, config.devices_per_worker(), LinkDilation(config, byte_scale),
                                                share);
}

ExperimentConfig WithScaledLayoutBytes(const ExperimentConfig& config, double byte_scale) {
  const double b = ByteScale(config, byte_scale);
  if (b == 1) return config;
  ExperimentConfig scaled = config;
  // Settled on the sizes as written: setting batch_bytes below would
  // otherwise turn the tuner's default off.
  PsSchedulingConfig* s = scaled.mutable_ps_scheduling();
  if (!s->has_tune()) s->set_tune(TuningOn(config));
  auto divide = [b](int64_t bytes) { return bytes > 0 ? std::max<int64_t>(1, std::ceil(bytes / b)) : bytes; };
  scaled.set_partition_bytes(divide(config.partition_bytes()));
  scaled.set_fusion_threshold_bytes(divide(config.fusion_threshold_bytes()));
  s->set_batch_bytes(divide(s->batch_bytes()));
  s->set_window_bytes(divide(s->window_bytes()));
  return scaled;
}

bool EmulatedTopology(const ExperimentConfig& config) {
  return config.device() == "emulated" && !config.emulation().topology().empty();
}

}  // namespace pstrain
