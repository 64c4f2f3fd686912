#include "ps/shard/shard.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/metrics/memory_usage.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "ps/shard/shard_checkpoint.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<PsShard>> PsShard::Create(const PsShardOptions& options) {
  if (options.num_workers <= 0) return absl::InvalidArgumentError("PS shard needs at least one worker");
  // The optimizer is created at Init (when the run's length is known); an
  // unknown name is refused now.
  PSTRAIN_RETURN_IF_ERROR(CreateOptimizer(options.optimizer).status());
  PSTRAIN_RETURN_IF_ERROR(LearningRateSchedule::Create(options.optimizer, 0).status());
  if (!options.tables.empty() && (options.num_shards <= 0 || options.shard_index >= options.num_shards)) {
    return absl::InvalidArgumentError(absl::StrCat("PS shard ", options.shard_index, " of ", options.num_shards,
                                                   " shards cannot hold embedding tables"));
  }
  WorkerRoster roster(options.num_workers, absl::Now(), options.workers_join);
  ConsistencyOptions consistency;
  consistency.shard_index = options.shard_index;
  consistency.num_workers = options.num_workers;
  consistency.replicas_to_aggregate = options.replicas_to_aggregate;
  consistency.staleness = options.staleness;
  consistency.timeouts = options.timeouts;
  consistency.departed = roster.departed();
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ConsistencyPolicy> policy,
                           CreateConsistencyPolicy(options.consistency, consistency));
  std::unique_ptr<PsShard> shard(new PsShard(options, std::move(policy), std::move(roster)));
  // The tables are created at Init (when the run's length is known); a bad
  // table config is refused now.
  PSTRAIN_RETURN_IF_ERROR(SparseTables::Create(SparseOptionsOf(options, 0)).status());
  return shard;
}

PsShard::PsShard(const PsShardOptions& options, std::unique_ptr<ConsistencyPolicy> policy, WorkerRoster roster)
    : options_(options),
      policy_(std::move(policy)),
      store_(options.shard_index),
      parked_(options.shard_index, absl::Seconds(options.timeouts.rpc_seconds())),
      members_(options.shard_index, std::move(roster)) {}

PsShard::~PsShard() { CancelPendingPulls(absl::CancelledError("PS shard shutting down")); }

absl::Status PsShard::ValidateWorker(int worker, const char* what) const {
  if (worker < 0 || worker >= options_.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": worker ", worker, " out of range [0, ", options_.num_workers, ")"));
  }
  return absl::OkStatus();
}

namespace {

// A chief layout a worker can apply: none (version 0), or every field in
// range.
absl::Status ValidateChiefLayout(const ChiefLayout& layout) {
  if (layout.version() < 0 || (layout.version() > 0 && (layout.batch_bytes() < 1 || layout.window_bytes() < 0 ||
                                                        layout.pushes_per_shard() < 0))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "heartbeat: chief layout version ", layout.version(), " with batch_bytes ", layout.batch_bytes(),
        ", window_bytes ", layout.window_bytes(), ", pushes_per_shard ", layout.pushes_per_shard(),
        " (want version >= 0 and, with a version, batch_bytes >= 1, window_bytes >= 0, pushes_per_shard >= 0)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PsShard::Heartbeat(const HeartbeatRequest& request, HeartbeatResponse* response) {
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(request.worker(), "heartbeat"));
  PSTRAIN_RETURN_IF_ERROR(ValidateChiefLayout(request.layout()));
  bool departed = false;
  {
    absl::MutexLock lock(&mu_);
    if (request.worker() == 0 && request.layout().version() > chief_layout_.version()) {
      chief_layout_ = request.layout();
    }
    *response->mutable_layout() = chief_layout_;
    members_.Note(request.worker(), request.incarnation(), store_.NewestVersion());
    WorkerRoster& roster = members_.roster();
    roster.Heard(request.worker(), absl::Now(), request.step());
    departed = request.finished_pushing() && roster.FinishedPushing(request.worker());
    switch (roster.SetPaused(request.worker(), request.paused())) {
      case WorkerRoster::Pause::kPaused:
        departed = true;  // the steps under way stop waiting for it
        LOG(INFO) << "shard " << options_.shard_index << ": worker " << request.worker() << " paused at step "
                  << request.step() << " (it waits for a chunk of data)";
        break;
      case WorkerRoster::Pause::kResumed:
        LOG(INFO) << "shard " << options_.shard_index << ": worker " << request.worker() << " resumed at step "
                  << request.step();
        break;
      case WorkerRoster::Pause::kUnchanged:
        break;
    }
  }
  if (departed) OnDeparted(request.worker());
  return absl::OkStatus();
}

absl::StatusOr<CheckpointResponse> PsShard::Checkpoint(const CheckpointRequest& request) {
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(request.worker(), "checkpoint"));
  if (!store_.initialized()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint: shard ", options_.shard_index, " has no variables yet (no Init)"));
  }
  if (request.path().empty()) return absl::InvalidArgumentError("checkpoint: empty path");
  const absl::Time start = absl::Now();
  SparseTables* tables = Tables("checkpoint").value_or(nullptr);
  if (tables != nullptr && options_.consistency == "sync") {
    absl::Status applied = tables->AwaitSteps(request.step(), start + absl::Seconds(options_.timeouts.rpc_seconds()));
    if (!applied.ok()) {
      return absl::Status(applied.code(), absl::StrCat("checkpoint of step ", request.step(), ": shard ",
                                                       options_.shard_index, ": ", applied.message()));
    }
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      CheckpointResponse response,
      WriteShardCheckpoint(request.path(), options_.shard_index, request.step(), options_.optimizer.name(),
                           store_.variables(), tables, request.tables_since_step()));
  LOG(INFO) << "shard " << options_.shard_index << ": checkpoint of step " << request.step() << " written to "
            << request.path() << " (" << response.bytes() << " bytes in " << absl::FormatDuration(absl::Now() - start)
            << (response.tables_since_step() > 0
                    ? absl::StrCat("; tables: the rows changed since step ", response.tables_since_step())
                    : std::string())
            << ")";
  return response;
}

absl::Status PsShard::Done(const DoneRequest& request) {
  const int worker = request.report().worker();
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(worker, "done"));
  {
    absl::MutexLock lock(&mu_);
    if (!members_.roster().Done(worker, request.report())) return absl::OkStatus();
    members_.stragglers().Finished(worker);
    LOG(INFO) << "shard " << options_.shard_index << ": worker " << worker << " done after " << request.report().steps()
              << " steps";
  }
  OnDeparted(worker);  // also: ssp pulls no longer wait for this worker
  return absl::OkStatus();
}

void PsShard::OnDeparted(int worker) {
  if (store_.initialized()) {
    for (auto& [name, var] : store_.variables()) {
      absl::MutexLock lock(&var->mu);
      if (policy_->OnWorkerDeparted(*var, store_.updater())) ++applied_updates_;
    }
  }
  WakePulls();
}

absl::StatusOr<ChunkResponse> PsShard::Chunk(const ChunkRequest& request) {
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(request.worker(), "chunk"));
  absl::MutexLock lock(&mu_);
  DataLedger* ledger = members_.ledger();
  if (ledger == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "chunk: shard ", options_.shard_index,
        " keeps no data ledger (data.sharding dynamic: shard 0 keeps it once the chief's Init sets it up)"));
  }
  members_.Note(request.worker(), request.incarnation(), store_.NewestVersion());
  return ledger->Exchange(request.worker(), request);
}

StatsResponse PsShard::Stats(const StatsRequest& request, bool with_ledger_state) const {
  StatsResponse stats;
  ShardLoad* load = stats.mutable_load();
  {
    absl::MutexLock lock(&mu_);
    members_.Report(&stats, request.ledger_before_step(), with_ledger_state);
  }
  stats.set_generation(store_.generation());
  load->set_shard(options_.shard_index);
  if (store_.initialized()) {
    load->set_variables(store_.variables().size());
    load->set_variable_bytes(store_.ValueBytes());
  }
  load->set_bytes_in(bytes_in_.load());
  load->set_bytes_out(bytes_out_.load());
  load->set_apply_seconds(apply_nanos_.load() * 1e-9);
  load->set_applied_updates(applied_updates_.load());
  load->set_dropped_gradients(dropped_gradients_.load());
  policy_->FillLoad(load);
  if (absl::StatusOr<SparseTables*> tables = Tables("stats"); tables.ok()) {
    for (TableStats& t : (*tables)->Stats()) {
      load->set_table_rows(load->table_rows() + t.rows());
      load->set_table_bytes(load->table_bytes() + t.bytes());
      *stats.add_tables() = std::move(t);
    }
  }
  load->set_peak_rss_bytes(PeakRssBytes());
  return stats;
}

absl::Status PsShard::Check(absl::Time now) {
  ExpirePulls(now);
  if (absl::StatusOr<SparseTables*> tables = Tables("check"); tables.ok()) (*tables)->ExpirePulls(now);
  PSTRAIN_RETURN_IF_ERROR(CheckStalledSteps(now));
  return CheckLostWorkers(now);
}

absl::Status PsShard::CheckStalledSteps(absl::Time now) const {
  if (store_.initialized()) {
    for (const auto& [name, var] : store_.variables()) {
      absl::MutexLock lock(&var->mu);
      PSTRAIN_RETURN_IF_ERROR(policy_->CheckStalled(*var, now));
    }
  }
  return absl::OkStatus();
}

absl::Status PsShard::CheckLostWorkers(absl::Time now) {
  std::vector<int> newly_lost;
  // Under a policy that cannot go on without a worker: every worker over
  // its limit, the longest silent first. The shard cannot tell a dead
  // worker from a live one whose heartbeats did not get through, so it
  // names all it has not heard from rather than the lowest index.
  std::vector<std::pair<absl::Duration, std::string>> fatal;
  {
    absl::MutexLock lock(&mu_);
    for (WorkerRoster::Silent& s :
         members_.roster().SilentWorkers(now, absl::Seconds(options_.timeouts.worker_lost_seconds()),
                                         absl::Seconds(options_.timeouts.startup_seconds()))) {
      if (policy_->LostWorkerIsFatal() && !options_.continue_without_lost) {
        fatal.emplace_back(s.silent, std::move(s.what));
        continue;
      }
      members_.Lose(s.worker, store_.NewestVersion(),
                    absl::StrCat(s.what, "; ", options_.consistency, " training continues without it"));
      newly_lost.push_back(s.worker);
    }
  }
  if (!fatal.empty()) {
    std::stable_sort(fatal.begin(), fatal.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    return absl::UnavailableError(
        absl::StrJoin(fatal, "; ", [](std::string* out, const auto& lost) { out->append(lost.second); }));
  }
  for (int w : newly_lost) OnDeparted(w);
  return absl::OkStatus();
}

bool PsShard::Finished() const {
  absl::MutexLock lock(&mu_);
  return members_.roster().AllDoneOrLost();
}

int64_t PsShard::MinVersion() const { return store_.MinVersion(); }

std::vector<int> PsShard::LostWorkers() const {
  absl::MutexLock lock(&mu_);
  return members_.roster().Lost();
}

}  // namespace pstrain
