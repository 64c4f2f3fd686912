#include "device/topology/emulated_interconnect.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/time/clock.h"
#include "glog/logging.h"

namespace pstrain {

EmulatedInterconnect::EmulatedInterconnect(const InterconnectProfile& profile, int devices, double time_scale,
                                           double collective_compute_share)
    : profile_(profile),
      devices_(devices),
      time_scale_(time_scale),
      collective_compute_share_(collective_compute_share),
      start_(absl::Now()),
      model_(profile.links),
      collectives_(devices, 0),
      collective_since_(devices, absl::InfinitePast()),
      collective_time_(devices, absl::ZeroDuration()) {
  CHECK(devices >= 1 && devices <= profile.devices) << devices << " devices on " << profile.name;
  CHECK_GE(time_scale, 1);
}

double EmulatedInterconnect::ModelNow() const { return absl::ToDoubleSeconds(absl::Now() - start_) / time_scale_; }

absl::Time EmulatedInterconnect::RealTimeOf(double model_seconds) const {
  if (!std::isfinite(model_seconds)) return absl::InfiniteFuture();
  return start_ + absl::Seconds(model_seconds * time_scale_);
}

void EmulatedInterconnect::Run(const std::vector<std::pair<std::vector<int>, double>>& flows) {
  absl::MutexLock lock(&mu_);
  std::vector<FlowModel::FlowId> ids;
  for (const auto& [path, bytes] : flows) {
    ids.push_back(model_.Start(path, bytes, ModelNow()));
    if (!path.empty()) bytes_moved_ += static_cast<int64_t>(bytes);
  }
  // New flows only slow the others down: they wake at their old deadlines
  // and wait on. A flow's arrival speeds the others up: they are woken to
  // wait for their earlier deadlines.
  while (!AllArrived(ids)) {
    changed_.WaitWithDeadline(&mu_, RealTimeOf(model_.NextArrival()));
    const int in_flight = model_.in_flight();
    model_.Advance(ModelNow());
    if (model_.in_flight() < in_flight) changed_.SignalAll();
  }
}

bool EmulatedInterconnect::AllArrived(const std::vector<FlowModel::FlowId>& ids) const {
  for (FlowModel::FlowId id : ids) {
    if (!model_.Done(id)) return false;
  }
  return true;
}

void EmulatedInterconnect::Transfer(const std::vector<Copy>& copies) {
  std::vector<std::pair<std::vector<int>, double>> flows;
  for (const Copy& c : copies) {
    CHECK(c.from >= kHostEndpoint && c.from < devices_ && c.to >= kHostEndpoint && c.to < devices_)
        << "copy " << c.from << " -> " << c.to << " on " << devices_ << " devices";
    flows.emplace_back(profile_.Path(c.from, c.to), static_cast<double>(c.bytes));
  }
  Run(flows);
}

void EmulatedInterconnect::HostPass(int64_t read_bytes, int64_t written_bytes) {
  Run({{{profile_.memory_read_link}, static_cast<double>(read_bytes)},
       {{profile_.memory_write_link}, static_cast<double>(written_bytes)}});
}

void EmulatedInterconnect::RingAllReduce(int64_t bytes) {
  const std::vector<int> ring = profile_.Ring(devices_);
  if (ring.size() < 2) return;
  const auto flows = RingAllReduceFlows(profile_, devices_, bytes);
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    for (int d : ring) {
      if (collectives_[d]++ == 0) collective_since_[d] = now;
    }
  }
  Run(flows);
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  for (int d : ring) {
    if (--collectives_[d] == 0) collective_time_[d] += now - collective_since_[d];
  }
}

absl::Duration EmulatedInterconnect::TakeComputeDelay(int device) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (collectives_[device] > 0) {
    collective_time_[device] += now - collective_since_[device];
    collective_since_[device] = now;
  }
  const absl::Duration owed = collective_time_[device] * collective_compute_share_;
  collective_time_[device] = absl::ZeroDuration();
  return owed;
}

int64_t EmulatedInterconnect::bytes_moved() const {
  absl::MutexLock lock(&mu_);
  return bytes_moved_;
}

}  // namespace pstrain
