// FusedAllReducer: the all-reduce of one worker's gradients across workers
// with a host Collective (gloo, mpi, or a hierarchical composition of them),
// fused and overlapped with backward.
//
// A communication thread reduces each bucket of the FusionPlan as soon as
// every replica has finalised all of its gradients (GradientReady, called
// from the replicas' gradient-ready hooks), in plan order:
//   sum over the worker's replicas,
//   Collective::AllReduceSum across the workers,
//   the sum back into every replica's gradient.
// When a bucket's gradients are adjacent in memory (a model's are:
// models/model.h), it is reduced in place: one replica costs no copy at all;
// otherwise it is packed into a fusion buffer and unpacked. With a 16-bit
// wire type (compression fp16/bf16) the worker's sum is encoded into a
// 16-bit buffer, all-reduced as such (half the bytes), and decoded back. After a step every
// replica's gradients hold the SUM over all devices of all workers: the
// caller applies gradient_scale() (1 / devices in all) inside its optimizer's
// pass (OptimizerStep::gradient_scale) rather than in a pass of its own. The
// allreduce strategy uses it for every host backend, and
// `pstrain-bench allreduce` measures this same path.
//
// Threads: BeginStep, FinishStep and the destructor from the training
// thread; GradientReady from any thread (the replicas' backward threads).
// Gradients are read and written only by the communication thread between
// BeginStep and FinishStep.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/concurrency/thread_role.h"
#include "common/tensor.h"
#include "worker/collective/collective.h"
#include "worker/fusion.h"
#include "worker/timeline.h"

namespace pstrain {

class FusedAllReducer {
 public:
  // `gradients[r][v]`: replica r's gradient of variable v (plain host
  // tensors, model order; the same shapes for every replica), kept alive by
  // the caller while the reducer lives. `collective` (not owned) spans the
  // workers; `num_workers` divides the sum. `wire_dtype`: what the buckets
  // travel as (DT_FLOAT32, DT_FLOAT16 or DT_BFLOAT16).
  static absl::StatusOr<std::unique_ptr<FusedAllReducer>> Create(Collective* collective,
                                                                 std::vector<std::vector<Tensor>> gradients,
                                                                 int64_t fusion_threshold_bytes, int num_workers,
                                                                 WireDType wire_dtype = DT_FLOAT32);
  // Stops the communication thread (after the step in flight, if any).
  ~FusedAllReducer();

  // A new step: no gradient is ready yet.
  void BeginStep() ABSL_LOCKS_EXCLUDED(mu_);
  // One replica's gradient of `variable` is final.
  void GradientReady(int variable) ABSL_LOCKS_EXCLUDED(mu_);
  // Backward is over: reduces what is left and waits until every bucket is
  // done. The first error of the step (the collective's, naming the rank and
  // the timeout), else OK. Adds the time spent waiting to *waited.
  absl::Status FinishStep(absl::Duration* waited) ABSL_LOCKS_EXCLUDED(mu_);

  // The most elements handed to the collective in one call: a bucket above
  // it is all-reduced in pieces (in the same order on every rank).
  // Collective libraries allocate scratch of the message's size per call
  // (Open MPI's allreduce does), and on the communication thread glibc's
  // per-thread heaps cannot hold a block of 64 MiB, so a call that large maps
  // and faults in fresh memory every time (8x slower measured for 64 MiB
  // over mpi); 16 MiB pieces keep that scratch in the heap.
  static constexpr int64_t kMaxCollectiveElements = (int64_t{16} << 20) / 4;

  const FusionPlan& plan() const { return plan_; }
  // Records each bucket's phases (fuse, all-reduce, unfuse) and the
  // training thread's wait on `timeline` (null: none). Set before the first
  // step.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  // 1 / (replicas x workers): what turns the summed gradients into the mean.
  float gradient_scale() const { return 1.0f / static_cast<float>(gradients_.size() * num_workers_); }
  // Buckets reduced in place (their gradients adjacent in every replica).
  int buckets_in_place() const { return buckets_in_place_; }
  // Bytes handed to the collective so far, as they travelled.
  int64_t bytes_allreduced() const { return bytes_allreduced_.load(); }

 private:
  FusedAllReducer(Collective* collective, std::vector<std::vector<Tensor>> gradients, FusionPlan plan, int num_workers,
                  WireDType wire_dtype);
  // All-reduces the worker's sum of one bucket (n floats at sum) across the
  // workers, through the 16-bit buffer when the wire type says so.
  absl::Status AllReduceAcrossWorkers(float* sum, int64_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(communication_);
  // The communication thread: takes the role, reduces buckets until stopped.
  void CommunicationLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Reduces each bucket as it becomes ready, in plan order, until stopped.
  void ReduceReadyBuckets() ABSL_EXCLUSIVE_LOCKS_REQUIRED(communication_) ABSL_LOCKS_EXCLUDED(mu_);
  // Sum over replicas, across workers, back into every replica.
  absl::Status ReduceBucket(int bucket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(communication_);
  // The first element of `bucket`'s gradients in replica r when they are
  // adjacent (lowest variable first), else null.
  float* Contiguous(int r, int bucket) const;
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool StepDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Collective* const collective_;
  const std::vector<std::vector<Tensor>> gradients_;
  const FusionPlan plan_;
  const int num_workers_;
  const WireDType wire_dtype_;
  Timeline* timeline_ = nullptr;
  // The communication thread (common/concurrency/thread_role.h): what only
  // it touches once it runs (the constructor sizes the buffers before it
  // starts).
  ThreadRole communication_{"the fused all-reduce's communication thread"};
  std::vector<float> fusion_ ABSL_GUARDED_BY(communication_);
  std::vector<uint16_t> wire16_ ABSL_GUARDED_BY(communication_);  // 16-bit wire types
  std::atomic<int64_t> bytes_allreduced_{0};
  std::vector<bool> in_place_;  // per bucket
  int buckets_in_place_ = 0;

  mutable absl::Mutex mu_;
  BucketTracker tracker_ ABSL_GUARDED_BY(mu_);
  bool step_active_ ABSL_GUARDED_BY(mu_) = false;
  bool reducing_ ABSL_GUARDED_BY(mu_) = false;  // a bucket is with the collective
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status step_error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace pstrain
