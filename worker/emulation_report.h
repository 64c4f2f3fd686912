// The `emulation` record of an emulated run's result.json: what was
// emulated, scaling efficiency against one emulated device, and whether this
// machine kept up (docs/EMULATION.md, "Valid or CPU-bound").
#pragma once

#include "proto/config.pb.h"
#include "proto/results.pb.h"

namespace pstrain {

// A run is CPU-bound when this machine was busier than kCpuBoundMachineShare
// of its CPU time, or one of its emulated workers kept more than
// kCpuBoundWorkerCores busy: an emulated worker should mostly wait (on
// modelled compute or on links; valid runs measure well under 0.1 cores),
// and a worker busy a quarter of the time is on the critical path.
inline constexpr double kCpuBoundMachineShare = 0.5;
inline constexpr double kCpuBoundWorkerCores = 0.25;
// A suggested time_scale aims at half of each limit, for margin.

// `result` holds the workers' reports (images/sec already in emulated time,
// cpu_cores each); `device_images_per_sec` is one emulated device's rate (0
// for a real device) and `machine_busy` the chief's reading of the whole
// machine over its measured steps (-1: unknown); `byte_scale` the run's
// (common/config/byte_scale.h), recorded with device emulated.
Emulation EmulationRecord(const ExperimentConfig& config, const RunResult& result, double device_images_per_sec,
                          double machine_busy, double byte_scale = 1);

}  // namespace pstrain
