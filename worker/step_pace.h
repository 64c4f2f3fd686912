// StepPace: what a worker and the parameter-server shards tell each other
// about its pace. The worker measures its busy time per step (the step's
// wall time less what it waited for others) and every push of its next step
// carries it (PushRequest.busy_seconds); shard 0 compares the workers'
// (ps/shard/straggler_watch.h) and every pull answer names the stragglers
// it sees now (PullResponse.stragglers).
//
// Thread-safe: the training thread sets the busy time, push and pull
// threads read it and record the answers.
#pragma once

#include <atomic>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/ps.pb.h"

namespace pstrain {

class StepPace {
 public:
  // The busy seconds of the worker's last step; 0 before the first.
  void set_busy_seconds(double seconds) { busy_seconds_.store(seconds); }
  double busy_seconds() const { return busy_seconds_.load(); }

  // Shard 0's latest answer: the stragglers it names now.
  void SetStragglers(std::vector<Straggler> stragglers) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    stragglers_ = std::move(stragglers);
  }
  std::vector<Straggler> stragglers() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return stragglers_;
  }

 private:
  std::atomic<double> busy_seconds_{0};
  mutable absl::Mutex mu_;
  std::vector<Straggler> stragglers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
