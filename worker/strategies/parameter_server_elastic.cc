// ParameterServerStrategy's membership and data ledger (elastic runs;
// docs/ELASTIC.md): waiting for elastic.min_workers, the ledger the chief
// installs on shard 0 and records in every checkpoint, and the record of who
// joined and left that the chief puts in result.json.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/strategies/parameter_server.h"

namespace pstrain {

bool ParameterServerStrategy::WorkersJoin() const {
  const int min_workers = context_.config->elastic().min_workers();
  return min_workers > 0 && min_workers < context_.num_workers;
}

absl::Status ParameterServerStrategy::WaitForMinWorkers(absl::Duration wait) {
  if (!WorkersJoin()) return absl::OkStatus();
  const int min_workers = context_.config->elastic().min_workers();
  const absl::Time deadline = absl::Now() + wait;
  bool said = false;
  while (true) {
    PSTRAIN_ASSIGN_OR_RETURN(const StatsResponse s0, client_->ChiefShardStats());
    // Workers that came and finished count: the run was under way.
    if (s0.present_size() + s0.done_size() >= min_workers) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("worker ", context_.worker_index, ": only ", s0.present_size(), " workers [",
                       absl::StrJoin(s0.present(), ","), "] present after ", absl::FormatDuration(wait),
                       " (timeouts.startup_seconds); elastic.min_workers is ", min_workers));
    }
    if (!said) {
      std::cout << "worker " << context_.worker_index << ": waiting for elastic.min_workers (" << min_workers
                << ") workers; " << s0.present_size() << " present" << std::endl;
      said = true;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

std::optional<LedgerSpec> ParameterServerStrategy::LedgerToInstall(const std::optional<RestorePoint>& restore) const {
  if (context_.ledger == nullptr) return std::nullopt;
  LedgerSpec spec = *context_.ledger;
  if (restore) *spec.mutable_state() = restore->manifest.ledger();
  return spec;
}

absl::StatusOr<std::optional<LedgerState>> ParameterServerStrategy::LedgerAt(int64_t step) {
  if (context_.ledger == nullptr) return std::nullopt;
  // Async and ssp: a chunk counts once reported (steps are per worker).
  const int64_t before = context_.config->consistency() == "sync" ? step : 0;
  PSTRAIN_ASSIGN_OR_RETURN(const StatsResponse s0, client_->ChiefShardStats(before));
  return s0.ledger_state();
}

absl::StatusOr<ChunkResponse> ParameterServerStrategy::ExchangeChunks(const std::vector<CompletedChunk>& completed) {
  return client_->Chunk(completed);
}

absl::Status ParameterServerStrategy::PauseSteps() {
  // This worker's last gradients count before the shards stop waiting for
  // it: with the pipeline, its pushes are in once the next values arrived.
  if (pipeline_ != nullptr) PSTRAIN_RETURN_IF_ERROR(pipeline_->WaitForPulls().status());
  paused_ = true;
  std::cout << "worker " << context_.worker_index << ": no chunk of data free while others hold the last ones; "
            << "waiting for them (paused at step " << current_step_.load() << ")" << std::endl;
  return SendHeartbeat();
}

absl::StatusOr<int64_t> ParameterServerStrategy::ResumeSteps(int64_t next_step) {
  paused_ = false;
  PSTRAIN_RETURN_IF_ERROR(SendHeartbeat());
  if (context_.config->consistency() != "sync") {
    std::cout << "worker " << context_.worker_index << ": a chunk came back; resuming at step " << next_step
              << std::endl;
    return next_step;
  }
  // The others went on meanwhile: train at the step being aggregated (at
  // least the one after this worker's last, which counted), on its values
  // (answers to pulls of the paused steps must not land on them).
  if (pipeline_ != nullptr) pipeline_->Abandon();
  const TimeoutConfig& t = context_.config->timeouts();
  PSTRAIN_ASSIGN_OR_RETURN(pulled_version_,
                           client_->Pull(next_step, absl::Seconds(t.sync_step_seconds() + t.rpc_seconds()),
                                         /*wait_for_ready=*/false, next_step));
  pulled_at_start_ = true;
  context_.replicas->BroadcastValues(0);
  if (pipeline_ != nullptr) pipeline_->ValuesInPlace(pulled_version_);
  std::cout << "worker " << context_.worker_index << ": a chunk came back; resuming at step " << pulled_version_
            << std::endl;
  return pulled_version_;
}

void ParameterServerStrategy::AddMembership(const StatsResponse& shard0, ClusterReport* report) const {
  report->membership.assign(shard0.membership().begin(), shard0.membership().end());
  report->stragglers.assign(shard0.stragglers().begin(), shard0.stragglers().end());
  if (shard0.has_ledger()) report->ledger = shard0.ledger();
}

}  // namespace pstrain
