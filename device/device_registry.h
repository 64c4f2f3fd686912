// Device kinds by config name (`device`, `local_parameter_device`), each
// registered where what it computes on is made: "cpu" in device/cpu/
// cpu_device.cc, "gpu" in device/cuda/cuda_device.cc (unavailable, with the
// reason, in a build without CUDA: device/no_cuda/), "cpu_mirrored" in
// device/cpu/cpu_mirrored_device.cc (CPU replicas laid out as GPU replicas),
// "emulated" in worker/emulated_device.cc
// (a modelled device whose replicas compute on the CPU). Registering also
// makes config validation accept the name (in the binaries that link the
// device layer: workers, not parameter servers).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/registry.h"
#include "common/tensor.h"
#include "device/precision.h"

namespace pstrain {

class CopyEngine;
class DeviceContext;

struct DeviceEntry {
  // One line for documentation and messages.
  std::string summary;
  // What its replicas compute on.
  DeviceKind kind = DeviceKind::kCpu;
  // It can hold a worker's variables (`local_parameter_device`).
  bool holds_variables = true;
  // Makes the context of device `ordinal` of this kind; null for a device
  // that borrows another kind's (emulated).
  std::function<absl::StatusOr<std::unique_ptr<DeviceContext>>(int ordinal)> create;
  // Another device it may stand for as local_parameter_device (emulated:
  // "gpu", where its own config check allows it); "" for none.
  std::string stands_for;
  // Whether this machine has the device (a GPU); null: always. Its error
  // says what is missing.
  std::function<absl::Status()> present;
  // How many of it this process can use; null: one.
  std::function<int()> count;
  // OK when its contexts compute in `precision` in this build on this
  // machine; else FailedPrecondition (the machine lacks it, naming what it
  // has) or Unimplemented, saying what would be needed. Null: fp32 only.
  std::function<absl::Status(Precision precision)> supports;
  // Non-null for a device of host memory that stands for one with memory of
  // its own (cpu_mirrored): its replicas keep host mirrors, as GPU replicas
  // do, and copy through the engine this makes for each replica's context.
  std::function<std::unique_ptr<CopyEngine>(DeviceContext& context)> mirror_copies;
};
Registry<DeviceEntry>& DeviceRegistry();

// OK when this machine has what device `name` computes on (or `name` is not
// registered: the config check says so); else the entry's error, as
// "device <name>: <what is missing>". The worker's start-up (and
// --check_config) asks it.
absl::Status CheckDevicePresent(absl::string_view name);

// The kind device `name` computes on: NotFound listing the known names, or
// FailedPrecondition with the reason for one this build lacks.
absl::StatusOr<DeviceKind> DeviceKindOf(absl::string_view name);

}  // namespace pstrain
