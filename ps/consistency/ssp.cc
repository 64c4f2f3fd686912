// ssp (stale synchronous parallel): gradients are applied on arrival, as in
// async, but a worker about to run local step t may pull only once every
// live worker has completed at least t - staleness steps; until then its pull
// waits (and the wait is reported in the shard's load). A lost worker stops
// being waited for, and so does a paused one (waiting for data); the run
// goes on.
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "ps/consistency/consistency_policy.h"

namespace pstrain {
namespace {

class SspPolicy : public ConsistencyPolicy {
 public:
  explicit SspPolicy(const ConsistencyOptions& options)
      : num_workers_(options.num_workers), staleness_(options.staleness) {}

  absl::StatusOr<PushOutcome> Push(ShardVariable& var, int worker, int64_t step, IncomingFrame& payload,
                                   const VariableUpdater& updater) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    // num_workers updates make one global step of the schedule.
    PSTRAIN_RETURN_IF_ERROR(updater.ApplyFromWire(var, payload, var.version.load() / num_workers_));
    return PushOutcome::kApplied;
  }

  // Live workers (not done, lost or paused) that have completed fewer than
  // request.local_step - staleness steps.
  std::vector<int> PullBlockers(const PullRequest& request, const WorkerProgress& workers) const override {
    std::vector<int> laggards;
    const int64_t needed = request.local_step() - staleness_;
    for (int w = 0; w < num_workers_; ++w) {
      if (w == request.worker() || workers.done[w] || workers.lost[w] || workers.paused[w]) continue;
      if (workers.completed_steps[w] < needed) laggards.push_back(w);
    }
    return laggards;
  }

  std::string DescribeBlockers(const PullRequest& request, const std::vector<int>& blockers) const override {
    return absl::StrCat("ssp: worker ", request.worker(), " at step ", request.local_step(), " waits for workers [",
                        absl::StrJoin(blockers, ","), "] to complete step ", request.local_step() - staleness_,
                        " (staleness ", staleness_, ")");
  }

  bool LostWorkerIsFatal() const override { return false; }

  void RecordWaitedPull(absl::Duration waited) override {
    blocked_pulls_.fetch_add(1);
    wait_nanos_.fetch_add(absl::ToInt64Nanoseconds(waited));
  }

  void FillLoad(ShardLoad* load) const override {
    load->set_ssp_blocked_pulls(blocked_pulls_.load());
    load->set_ssp_wait_seconds(wait_nanos_.load() * 1e-9);
  }

 private:
  const int num_workers_;
  const int staleness_;
  std::atomic<int64_t> blocked_pulls_{0};
  std::atomic<int64_t> wait_nanos_{0};
};

const bool kRegistered = ConsistencyRegistry().Register(
    "ssp", {[](const ConsistencyOptions& o) { return std::unique_ptr<ConsistencyPolicy>(new SspPolicy(o)); }, nullptr});

}  // namespace
}  // namespace pstrain
