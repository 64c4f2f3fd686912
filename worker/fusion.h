// Tensor fusion (Horovod's): a model's gradients, in backward order, packed
// into buckets of at most `threshold_bytes`, each reduced as one message as
// soon as every gradient in it is final, so communication overlaps the rest
// of backward. The one implementation of bucketing and readiness for every
// all-reduce backend: the host one (fused_allreduce.h: gloo, mpi,
// hierarchical) and the NCCL strategy's device one.
#pragma once

#include <cstdint>
#include <vector>

namespace pstrain {

struct FusionPlan {
  // Variable indices per bucket, in backward order (the last variable of the
  // model first, as backward produces them).
  std::vector<std::vector<int>> buckets;
  // Element offset of each variable inside its bucket's buffer: variables in
  // ascending order (the layout of adjacent gradients), whatever the order
  // they become ready in.
  std::vector<int64_t> offset_in_bucket;
  // Elements of each bucket; the largest sizes a fusion buffer.
  std::vector<int64_t> bucket_elements;
  int64_t largest_bucket_elements = 0;

  // `variable_elements`: float elements of each variable, in model order.
  // A variable larger than `threshold_bytes` gets a bucket of its own; 0
  // gives every variable its own bucket.
  static FusionPlan Make(const std::vector<int64_t>& variable_elements, int64_t threshold_bytes);
};

// Which buckets of a plan may be reduced: those whose every gradient has been
// finalised by each of `replicas` replicas. Buckets are handed out strictly
// in plan order, because every rank must reduce them in the same order. Not
// thread-safe: the owner locks.
class BucketTracker {
 public:
  // `plan` must outlive the tracker.
  BucketTracker(const FusionPlan* plan, int replicas);

  // A new step: nothing is ready, nothing taken.
  void Reset();
  // One replica's gradient of `variable` is final.
  void MarkReady(int variable);
  // Every gradient of every replica is final (backward is over).
  void MarkAllReady();
  // The index of the next bucket when it is ready to be reduced, else -1.
  int NextReady() const;
  // Takes the next bucket (after NextReady() returned it).
  void Advance();
  // Every bucket of the step has been taken.
  bool AllTaken() const { return next_ == static_cast<int>(plan_->buckets.size()); }

 private:
  const FusionPlan* plan_;
  const int replicas_;
  std::vector<int> ready_;  // replicas whose gradient of variable v is final
  int next_ = 0;            // buckets taken this step
};

}  // namespace pstrain
