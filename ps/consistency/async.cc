// async: every gradient is applied as it arrives, range by range straight
// from the wire (Hogwild-style across variables; one update at a time per
// variable). Pulls return the latest values. A lost worker is logged and no
// longer waited for; the run goes on.
#include "common/status_macros.h"
#include "ps/consistency/consistency_policy.h"

namespace pstrain {
namespace {

class AsyncPolicy : public ConsistencyPolicy {
 public:
  explicit AsyncPolicy(const ConsistencyOptions& options) : num_workers_(options.num_workers) {}

  absl::StatusOr<PushOutcome> Push(ShardVariable& var, int worker, int64_t step, IncomingFrame& payload,
                                   const VariableUpdater& updater) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
    // num_workers updates make one global step of the schedule.
    PSTRAIN_RETURN_IF_ERROR(updater.ApplyFromWire(var, payload, var.version.load() / num_workers_));
    return PushOutcome::kApplied;
  }

  bool LostWorkerIsFatal() const override { return false; }

 private:
  const int num_workers_;
};

const bool kRegistered = ConsistencyRegistry().Register(
    "async",
    {[](const ConsistencyOptions& o) { return std::unique_ptr<ConsistencyPolicy>(new AsyncPolicy(o)); }, nullptr});

}  // namespace
}  // namespace pstrain
