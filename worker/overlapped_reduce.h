// OverlappedReduce: runs a local reduction variable by variable as soon as
// every replica's gradient of that variable is final, on a thread of its
// own, so the reduction overlaps the rest of backward (as NCCL all-reduces
// overlap it on GPUs). For reductions with LocalReduceEntry::reduce_one.
//
//   HookFor(r)    the gradient-ready hook of replica r for the step
//   Finish()      after every replica's step: reduces what no hook announced,
//                 waits for the rest, and readies the next step
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "models/model.h"
#include "worker/replica_set.h"

namespace pstrain {

class OverlappedReduce {
 public:
  OverlappedReduce(ReplicaSet& replicas, std::function<void(ReplicaSet&, int variable)> reduce_one);
  ~OverlappedReduce();

  GradientReadyHook HookFor(int replica);
  void Finish();

 private:
  void Ready(int variable);
  void Loop();
  bool HasWorkOrStop() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); }
  bool AllReduced() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reduced_ == variables_; }

  ReplicaSet& replicas_;
  const std::function<void(ReplicaSet&, int)> reduce_one_;
  const int variables_;
  absl::Mutex mu_;
  std::vector<int> ready_ ABSL_GUARDED_BY(mu_);  // [variable]: replicas whose gradient is final
  std::deque<int> queue_ ABSL_GUARDED_BY(mu_);
  int reduced_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace pstrain
