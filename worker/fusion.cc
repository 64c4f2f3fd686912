#include "worker/fusion.h"

#include <algorithm>

#include "glog/logging.h"

namespace pstrain {

FusionPlan FusionPlan::Make(const std::vector<int64_t>& variable_elements, int64_t threshold_bytes) {
  FusionPlan plan;
  plan.offset_in_bucket.assign(variable_elements.size(), 0);
  int64_t bytes = 0;
  for (int v = static_cast<int>(variable_elements.size()) - 1; v >= 0; --v) {
    const int64_t size = variable_elements[v] * static_cast<int64_t>(sizeof(float));
    if (plan.buckets.empty() || threshold_bytes == 0 || bytes + size > threshold_bytes) {
      plan.buckets.emplace_back();
      plan.bucket_elements.push_back(0);
      bytes = 0;
    }
    plan.buckets.back().push_back(v);
    plan.bucket_elements.back() += variable_elements[v];
    bytes += size;
  }
  // Inside a bucket the elements lie in variable order (lowest first), as a
  // model's adjacent gradients do: packed and in-place reductions agree.
  for (const std::vector<int>& bucket : plan.buckets) {
    int64_t offset = 0;
    for (auto it = bucket.rbegin(); it != bucket.rend(); ++it) {
      plan.offset_in_bucket[*it] = offset;
      offset += variable_elements[*it];
    }
  }
  for (int64_t n : plan.bucket_elements) plan.largest_bucket_elements = std::max(plan.largest_bucket_elements, n);
  return plan;
}

BucketTracker::BucketTracker(const FusionPlan* plan, int replicas) : plan_(plan), replicas_(replicas) {
  size_t variables = 0;
  for (const auto& bucket : plan_->buckets) variables += bucket.size();
  ready_.assign(variables, 0);
}

void BucketTracker::Reset() {
  std::fill(ready_.begin(), ready_.end(), 0);
  next_ = 0;
}

void BucketTracker::MarkReady(int variable) {
  CHECK_GE(variable, 0);
  CHECK_LT(variable, static_cast<int>(ready_.size()));
  ++ready_[variable];
}

void BucketTracker::MarkAllReady() { std::fill(ready_.begin(), ready_.end(), replicas_); }

int BucketTracker::NextReady() const {
  if (AllTaken()) return -1;
  for (int v : plan_->buckets[next_]) {
    if (ready_[v] < replicas_) return -1;
  }
  return next_;
}

void BucketTracker::Advance() {
  CHECK(!AllTaken());
  ++next_;
}

}  // namespace pstrain
