// sync: per variable, the gradients of step t == version are summed as they
// arrive (the first one copied, later ones added straight from the wire);
// once replicas_to_aggregate workers (default: all) have pushed step t, their
// mean is applied once (version t+1). A gradient for an already-applied step
// is dropped and counted (backup workers: replicas_to_aggregate below the
// worker count). A step never waits for more gradients than there are workers
// left to send one, so runs end cleanly as workers finish. Every step needs
// every live worker: a lost worker ends the run, naming it.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "ps/consistency/consistency_policy.h"

namespace pstrain {
namespace {

// The step being aggregated for one variable.
struct SyncStep : ConsistencyState {
  std::vector<float> sum;
  std::vector<bool> contributed;  // per worker
  int contributors = 0;
  absl::Time first_arrival;
};

class SyncPolicy : public ConsistencyPolicy {
 public:
  explicit SyncPolicy(const ConsistencyOptions& options)
      : options_(options),
        replicas_(options.replicas_to_aggregate > 0 ? options.replicas_to_aggregate : options.num_workers) {}

  std::unique_ptr<ConsistencyState> NewState(const ShardVariable& var) const override {
    auto state = std::make_unique<SyncStep>();
    state->contributed.assign(options_.num_workers, false);
    return state;
  }

  absl::Status CheckPush(const ShardVariable& var, int worker, int64_t step) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    if (step == var.version.load() && StepOf(var).contributed[worker]) {
      return absl::InvalidArgumentError(
          absl::StrCat("push: worker ", worker, " already pushed ", var.name, " for step ", step));
    }
    return absl::OkStatus();
  }

  bool HasGradientFrom(const ShardVariable& var, int worker, int64_t step) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    return step == var.version.load() && StepOf(var).contributed[worker];
  }

  absl::StatusOr<PushOutcome> Push(ShardVariable& var, int worker, int64_t step, IncomingFrame& payload,
                                   const VariableUpdater& updater) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    if (step < var.version.load()) {
      PSTRAIN_RETURN_IF_ERROR(payload.Consume(var.bytes(), [](const char*, size_t) {}));
      return PushOutcome::kDropped;
    }
    SyncStep& s = StepOf(var);
    if (s.contributors == 0) {
      s.sum.resize(var.n);
      s.first_arrival = absl::Now();
      PSTRAIN_RETURN_IF_ERROR(payload.Read(s.sum.data(), var.bytes()));
    } else {
      float* sum = s.sum.data();
      PSTRAIN_RETURN_IF_ERROR(payload.ConsumeFloats(var.bytes(), [sum](size_t first, const float* g, size_t count) {
        float* a = sum + first;
        // The shard's summation: vectorised (the wire buffer and the sum
        // never overlap), one RPC batch per transport thread. (_Pragma: this
        // lambda is a macro argument.)
        _Pragma("omp simd") for (size_t i = 0; i < count; ++i) a[i] += g[i];
      }));
    }
    s.contributed[worker] = true;
    ++s.contributors;
    return ApplyIfComplete(var, updater) ? PushOutcome::kApplied : PushOutcome::kAccumulated;
  }

  bool OnWorkerDeparted(ShardVariable& var, const VariableUpdater& updater) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    return ApplyIfComplete(var, updater);
  }

  std::string DescribeVariableWait(const ShardVariable& var) const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    return absl::StrCat("sync step ", var.version.load(), " is waiting for gradients from workers [",
                        absl::StrJoin(Missing(var), ","), "]");
  }

  absl::Status CheckStalled(const ShardVariable& var, absl::Time now) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    const SyncStep& s = StepOf(var);
    const absl::Duration limit = absl::Seconds(options_.timeouts.sync_step_seconds());
    if (s.contributors == 0 || now - s.first_arrival <= limit) return absl::OkStatus();
    return absl::DeadlineExceededError(absl::StrCat("sync step ", var.version.load(), ": waiting for gradients of ",
                                                    var.name, " from workers [", absl::StrJoin(Missing(var), ","),
                                                    "] for more than ", absl::FormatDuration(limit)));
  }

  bool LostWorkerIsFatal() const override { return true; }

 private:
  static SyncStep& StepOf(const ShardVariable& var) ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    return *static_cast<SyncStep*>(var.consistency.get());
  }

  // Gradients the step needs: replicas_to_aggregate, but no more than the
  // workers that have contributed or may still contribute.
  int Needed(const ShardVariable& var) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    const SyncStep& s = StepOf(var);
    int possible = 0;
    for (int w = 0; w < options_.num_workers; ++w) {
      if (!options_.departed[w].load() || s.contributed[w]) ++possible;
    }
    return std::max(1, std::min(replicas_, possible));
  }

  bool ApplyIfComplete(ShardVariable& var, const VariableUpdater& updater) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    SyncStep& s = StepOf(var);
    if (s.contributors == 0 || s.contributors < Needed(var)) return false;
    // A sync update is one global step.
    updater.ApplyMean(var, s.sum, s.contributors, /*global_step=*/var.version.load());
    s.contributed.assign(options_.num_workers, false);
    s.contributors = 0;
    return true;
  }

  std::vector<int> Missing(const ShardVariable& var) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    std::vector<int> missing;
    const SyncStep& s = StepOf(var);
    for (int w = 0; w < options_.num_workers; ++w) {
      if (!s.contributed[w]) missing.push_back(w);
    }
    return missing;
  }

  const ConsistencyOptions options_;
  const int replicas_;
};

const bool kRegistered = ConsistencyRegistry().Register(
    "sync",
    {[](const ConsistencyOptions& o) { return std::unique_ptr<ConsistencyPolicy>(new SyncPolicy(o)); }, nullptr});

}  // namespace
}  // namespace pstrain
