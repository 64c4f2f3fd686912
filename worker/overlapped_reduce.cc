#include "worker/overlapped_reduce.h"

#include <utility>

namespace pstrain {

OverlappedReduce::OverlappedReduce(ReplicaSet& replicas, std::function<void(ReplicaSet&, int)> reduce_one)
    : replicas_(replicas),
      reduce_one_(std::move(reduce_one)),
      variables_(static_cast<int>(replicas.variables(0).size())),
      ready_(variables_, 0),
      thread_([this] { Loop(); }) {}

OverlappedReduce::~OverlappedReduce() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

GradientReadyHook OverlappedReduce::HookFor(int) {
  return [this](int variable) { Ready(variable); };
}

void OverlappedReduce::Ready(int variable) {
  absl::MutexLock lock(&mu_);
  if (++ready_[variable] == replicas_.size()) queue_.push_back(variable);
}

void OverlappedReduce::Loop() {
  while (true) {
    int variable = 0;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &OverlappedReduce::HasWorkOrStop));
      if (queue_.empty()) return;  // stopping
      variable = queue_.front();
      queue_.pop_front();
    }
    reduce_one_(replicas_, variable);
    absl::MutexLock lock(&mu_);
    ++reduced_;
  }
}

void OverlappedReduce::Finish() {
  absl::MutexLock lock(&mu_);
  // Every replica's step is over: a variable no hook announced (none of
  // the model's layers released it) is reduced now.
  for (int v = 0; v < variables_; ++v) {
    if (ready_[v] < replicas_.size()) {
      ready_[v] = replicas_.size();
      queue_.push_back(v);
    }
  }
  mu_.Await(absl::Condition(this, &OverlappedReduce::AllReduced));
  reduced_ = 0;
  ready_.assign(variables_, 0);
}

}  // namespace pstrain
