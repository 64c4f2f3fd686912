// ConsistencyPolicy: the rules of one `consistency` (sync, async, ssp) inside
// a PS shard, chosen once when the shard is created. One file each in
// ps/consistency/, registered by name with the check of the config fields
// they read.
//
// The shard owns variables, workers, parked pulls and validation of what is
// well-formed; the policy decides what a gradient does to a variable, what a
// pull must wait for besides versions, what a waiting step reports, and
// whether a lost worker ends the run.
//
// Threads: methods taking a ShardVariable are called with that variable's
// lock held (annotated here; clang does not inherit annotations, so every
// override repeats them); PullBlockers and the Describe methods with the
// shard's mutex held (lock order: shard mutex, then variable locks). A
// policy keeps per-variable state in ShardVariable::consistency and guards
// anything else it keeps itself.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/config/config_checks.h"
#include "common/registry.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"
#include "ps/variable/shard_variable.h"

namespace pstrain {

struct ConsistencyOptions {
  int shard_index = 0;
  int num_workers = 1;
  int replicas_to_aggregate = 0;  // sync: gradients per step; 0: every worker
  int staleness = 0;              // ssp: steps a worker may run ahead of the slowest
  TimeoutConfig timeouts;
  // Per worker: done, lost, or finished pushing. Owned by the shard (which
  // outlives the policy); readable under any lock.
  const std::atomic<bool>* departed = nullptr;
};

// What the shard knows of its workers' progress, under its mutex.
struct WorkerProgress {
  std::vector<int64_t> completed_steps;  // steps each worker has pushed (ssp clocks)
  std::vector<bool> done;
  std::vector<bool> lost;
  std::vector<bool> paused;  // waiting for data (HeartbeatRequest.paused): not waited for
};

enum class PushOutcome {
  kAccumulated,  // kept for a later update (sync, step not complete yet)
  kApplied,      // the variable took an update
  kDropped,      // discarded: its step was already applied (sync with backup workers)
};

class ConsistencyPolicy {
 public:
  virtual ~ConsistencyPolicy() = default;

  // Per-variable state, created when the chief installs the variable.
  virtual std::unique_ptr<ConsistencyState> NewState(const ShardVariable& var) const { return nullptr; }

  // Policy-specific rejection of a push of `var` for `step`, checked for
  // every variable of a push before any of them changes (the shard has
  // already checked that step <= version). InvalidArgument naming why.
  virtual absl::Status CheckPush(const ShardVariable& var, int worker, int64_t step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    return absl::OkStatus();
  }
  // True when `worker` already contributed a gradient of `var` for `step`
  // that is still waiting to be applied (sync). A restarted worker repeats
  // such a gradient; the shard drops the repeat.
  virtual bool HasGradientFrom(const ShardVariable& var, int worker, int64_t step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    return false;
  }
  // Consumes exactly var.bytes() of `payload` (worker's gradient computed
  // from version `step`) and applies the policy.
  virtual absl::StatusOr<PushOutcome> Push(ShardVariable& var, int worker, int64_t step, IncomingFrame& payload,
                                           const VariableUpdater& updater) ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) = 0;
  // A worker departed (see ConsistencyOptions::departed): applies what no
  // longer waits for it. True when `var` took an update.
  virtual bool OnWorkerDeparted(ShardVariable& var, const VariableUpdater& updater)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    return false;
  }

  // Workers a pull must wait for, beyond its variables reaching
  // min_version; empty when it may proceed.
  virtual std::vector<int> PullBlockers(const PullRequest& request, const WorkerProgress& workers) const { return {}; }
  // Why a pull waits for `blockers` (PullBlockers' answer).
  virtual std::string DescribeBlockers(const PullRequest& request, const std::vector<int>& blockers) const {
    return "";
  }
  // What `var`, below a pull's min_version, is waiting for ("" when the
  // version says it all).
  virtual std::string DescribeVariableWait(const ShardVariable& var) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    return "";
  }
  // An error naming the culprits when `var` has waited too long for an
  // update at `now`.
  virtual absl::Status CheckStalled(const ShardVariable& var, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    return absl::OkStatus();
  }
  // True: a lost worker ends the run (every step needs it); false: training
  // goes on without it.
  virtual bool LostWorkerIsFatal() const = 0;

  // A parked pull was answered after waiting `waited` (statistics).
  virtual void RecordWaitedPull(absl::Duration waited) {}
  // Adds the policy's statistics to the shard's load report.
  virtual void FillLoad(ShardLoad* load) const {}
};

struct ConsistencyEntry {
  std::function<std::unique_ptr<ConsistencyPolicy>(const ConsistencyOptions& options)> create;
  // Checks the config fields the policy reads (null: none).
  ConfigCheck check;
};

Registry<ConsistencyEntry>& ConsistencyRegistry();

// The policy named `consistency`; NotFound listing the known ones.
absl::StatusOr<std::unique_ptr<ConsistencyPolicy>> CreateConsistencyPolicy(const std::string& consistency,
                                                                           const ConsistencyOptions& options);

}  // namespace pstrain
