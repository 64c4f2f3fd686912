// `device: emulated`: how long one device takes for a training step, from a
// device profile or a rate given directly, and the checks of the
// `emulation:` section (docs/EMULATION.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "device/topology/emulated_interconnect.h"
#include "models/emulated_model.h"
#include "proto/config.pb.h"

namespace pstrain {

// A device's measured training rate on a reference model, with where the
// figure was published.
struct DeviceProfile {
  std::string name;             // emulation.device_profile
  std::string reference_model;  // zoo name, at its default ImageNet shape
  double images_per_second;     // per device, fp32
  std::string source;
};
const std::vector<DeviceProfile>& DeviceProfiles();

// ResNet-50's forward FLOPs per example at [3, 224, 224] with 1000 classes,
// as the zoo counts them (multiply-add = 2): profiles on ResNet-50 scale to
// other models by this. The emulated-device test checks it against the zoo.
inline constexpr int64_t kResNet50ForwardFlops = 8'178'368'512;

// One emulated device's training rate for a model of `forward_flops` per
// example named `model_name`: emulation.images_per_second when given, else
// the profile's rate scaled by the reference's FLOPs / the model's (exact
// for ResNet-50 at [3, 224, 224]; an approximation for other models and
// shapes: docs/EMULATION.md).
absl::StatusOr<double> EmulatedImagesPerSecond(const ExperimentConfig& config, const std::string& model_name,
                                               int64_t forward_flops);

// One step of batch_size_per_device images at `images_per_second`: a third
// forward, two thirds backward, both multiplied by emulation.time_scale.
EmulatedCompute ModelledCompute(const ExperimentConfig& config, double images_per_second);

// The interconnect of one worker's emulated host (emulation.topology, for
// devices_per_worker devices, dilated by LinkDilation: the time scale times
// `byte_scale`), or null when the config names no topology.
absl::StatusOr<std::shared_ptr<EmulatedInterconnect>> EmulatedHostInterconnect(const ExperimentConfig& config,
                                                                               double byte_scale = 1);

// The config a worker trains with: `config` itself, except with device
// emulated and a byte scale b > 1 (common/config/byte_scale.h), where the
// layout's byte sizes (partition_bytes, fusion_threshold_bytes,
// ps_scheduling.batch_bytes and window_bytes) are divided by b, rounded up
// (0 stays 0), as the variables are (EmulatedModel). Whether the layout
// tuner runs is settled first, on the sizes as written (ps_scheduling.tune
// is set).
ExperimentConfig WithScaledLayoutBytes(const ExperimentConfig& config, double byte_scale);

// The config stands its replicas for devices with memory of their own
// inside an emulated host: device emulated with emulation.topology. The
// in-worker strategies then move what they would move on GPUs.
bool EmulatedTopology(const ExperimentConfig& config);

}  // namespace pstrain
