// ShardVariable: one variable (or partition) held by a PS shard, and
// VariableUpdater: the one way its value changes.
//
// Publication. A variable's value is an immutable buffer: a pull sends it
// (or lends it to a colocated worker: common/transport/shared_values.h)
// without copying or holding a lock; an update writes a fresh buffer (or the
// previous one, once nothing references it), swaps it in, bumps the version.
//
// Locks: `mu` guards a variable's data. A PS shard takes its own mutex before
// any variable's (PsShard::mu_ -> ShardVariable::mu), and several variables'
// locks in name order (VariableLocks); never the other way round. Tests run
// with absl's lock-order (deadlock) detection on.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/tensor.h"
#include "common/transport/frame.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "proto/ps.pb.h"

namespace pstrain {

// Per-variable state a consistency policy keeps (e.g. sync's gradient sum);
// guarded by the variable's mu.
struct ConsistencyState {
  virtual ~ConsistencyState() = default;
};

struct ShardVariable {
  std::string name;
  Shape shape;
  int64_t n = 0;

  absl::Mutex mu;
  std::shared_ptr<Buffer> value ABSL_GUARDED_BY(mu);  // published, never written again
  std::shared_ptr<Buffer> spare ABSL_GUARDED_BY(mu);  // previous value, reused once unshared
  std::vector<std::vector<float>> slots ABSL_GUARDED_BY(mu);
  // Updates applied; written under mu, readable without it.
  std::atomic<int64_t> version{0};
  std::unique_ptr<ConsistencyState> consistency ABSL_GUARDED_BY(mu);
  // The value at encoded_version in encoded_dtype (pulls with compression
  // fp16/bf16), made by the first such pull of each version; immutable once
  // made, like value.
  std::shared_ptr<Buffer> encoded ABSL_GUARDED_BY(mu);
  WireDType encoded_dtype ABSL_GUARDED_BY(mu) = DT_FLOAT32;
  int64_t encoded_version ABSL_GUARDED_BY(mu) = -1;

  size_t bytes() const { return static_cast<size_t>(n) * sizeof(float); }
};

// Holds the locks of several variables, taken in name order (so concurrent
// pushes of overlapping variable sets cannot deadlock). The analysis cannot
// follow a lock set: code under one calls var.mu.AssertHeld() per variable.
class VariableLocks {
 public:
  explicit VariableLocks(std::vector<ShardVariable*> vars);
  ~VariableLocks() { Release(); }
  void Release();

 private:
  std::vector<ShardVariable*> vars_;
};

// Applies the optimizer to shard variables. Created once the run's length is
// known (at Init); shared by every variable of the shard; stateless apart
// from the optimizer's configuration, so concurrent calls on different
// variables are safe.
class VariableUpdater {
 public:
  VariableUpdater(std::unique_ptr<Optimizer> optimizer, LearningRateSchedule schedule)
      : optimizer_(std::move(optimizer)), schedule_(std::move(schedule)) {}

  int num_slots() const { return optimizer_->num_slots(); }

  // Publishes update(var, g) where g is the next var.bytes() of `payload`,
  // applied range by range as they arrive (no copy of the gradient).
  absl::Status ApplyFromWire(ShardVariable& var, IncomingFrame& payload, int64_t global_step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu);
  // Publishes update(var, sum / count).
  void ApplyMean(ShardVariable& var, const std::vector<float>& sum, int count, int64_t global_step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu);

 private:
  // The buffer the next value goes into: the spare when no pull holds it.
  static std::shared_ptr<Buffer> NextBuffer(ShardVariable& var) ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu);
  static void Publish(ShardVariable& var, std::shared_ptr<Buffer> next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu);

  const std::unique_ptr<Optimizer> optimizer_;
  const LearningRateSchedule schedule_;
};

}  // namespace pstrain
