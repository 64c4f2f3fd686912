// EmulatedInterconnect: one worker's emulated devices and its host joined by
// an InterconnectProfile, on the real clock (emulation.topology,
// docs/EMULATION.md "Inside a host").
//
// The in-worker strategies call it where they move data on a real machine:
// every copy between a device and the host or between two devices, every
// pass over host memory, every collective among the devices. Each call
// blocks for the time the profile gives it while sharing the links with the
// calls of other threads in flight (FlowModel), times emulation.time_scale:
// link rates are divided by it, as the emulated hosts' links are. The bytes
// are the real tensors' byte counts; nothing is copied (an emulated device's
// memory is the host's).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "device/topology/flow_model.h"
#include "device/topology/interconnect_profile.h"

namespace pstrain {

class EmulatedInterconnect {
 public:
  struct Copy {
    int from = kHostEndpoint;  // kHostEndpoint or a device
    int to = kHostEndpoint;
    int64_t bytes = 0;
  };
  // The first `devices` of `profile` (at most profile.devices), time
  // dilated by `time_scale` >= 1; `collective_compute_share` in [0, 1).
  EmulatedInterconnect(const InterconnectProfile& profile, int devices, double time_scale,
                       double collective_compute_share);

  const InterconnectProfile& profile() const { return profile_; }
  int devices() const { return devices_; }

  // Starts every copy at once and returns when all have arrived.
  void Transfer(const std::vector<Copy>& copies);
  // One pass over host memory (a sum formed on the host): reads and writes
  // at once.
  void HostPass(int64_t read_bytes, int64_t written_bytes);
  // An all-reduce of `bytes` held by each of devices [0, devices()) along
  // the profile's ring (RingAllReduceFlows). The devices count as running a
  // collective meanwhile (TakeComputeDelay).
  void RingAllReduce(int64_t bytes);
  // The compute time `device` owes to collectives since the last call:
  // collective_compute_share x the time a collective ran on it.
  absl::Duration TakeComputeDelay(int device);

  // Everything moved so far over the links, in bytes (a copy that crosses
  // three links counts once).
  int64_t bytes_moved() const;

 private:
  // Starts the flows and waits until all have arrived.
  void Run(const std::vector<std::pair<std::vector<int>, double>>& flows);
  bool AllArrived(const std::vector<FlowModel::FlowId>& ids) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Seconds of modelled time since construction.
  double ModelNow() const;
  absl::Time RealTimeOf(double model_seconds) const;

  const InterconnectProfile& profile_;
  const int devices_;
  const double time_scale_;
  const double collective_compute_share_;
  const absl::Time start_;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  FlowModel model_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_moved_ ABSL_GUARDED_BY(mu_) = 0;
  // Per device: collectives running on it, since when, and the time owed.
  std::vector<int> collectives_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> collective_since_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Duration> collective_time_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
