#include "worker/strategies/parameter_server.h"

#include <algorithm>
#include <iostream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/placement.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/emulated_device.h"
#include "worker/local_reduce.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<Strategy>> ParameterServerStrategy::Create(const StrategyContext& context,
                                                                          std::string name,
                                                                          std::string local_reduce_spec) {
  const ExperimentConfig& config = *context.config;
  if (config.cluster().ps_hosts_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("variable_update ", name, " needs cluster.ps_hosts"));
  }
  std::unique_ptr<ParameterServerStrategy> strategy(
      new ParameterServerStrategy(context, std::move(name), std::move(local_reduce_spec)));
  std::vector<Variable>& variables = context.replicas->variables(0);
  std::vector<VariableShape> shapes;
  for (const Variable& v : variables) shapes.push_back({v.name, v.value.shape()});
  PSTRAIN_ASSIGN_OR_RETURN(
      std::vector<VariablePart> parts,
      PlanPlacement(shapes, config.cluster().ps_hosts_size(), config.placement(), config.partition_bytes()));
  PSTRAIN_ASSIGN_OR_RETURN(strategy->client_, PsClient::Create(config, context.worker_index, context.transport,
                                                               &variables, std::move(parts)));
  if (PipelineOn(config)) {
    strategy->pipeline_ =
        std::make_unique<PsPipeline>(strategy->client_.get(), context.replicas, config, context.timeline);
    strategy->tuning_ =
        PipelineTuning::Create(config, strategy->pipeline_.get(), context.timeline, context.worker_index);
  }
  strategy->overlap_ = strategy->pipeline_ == nullptr && context.replicas->size() == 1;
  for (int b = 0; b < strategy->client_->num_push_batches(); ++b) {
    strategy->batch_variables_.push_back(strategy->client_->Batch(b).variables);
  }
  return std::unique_ptr<Strategy>(std::move(strategy));
}

ParameterServerStrategy::~ParameterServerStrategy() { StopHeartbeats(); }

void ParameterServerStrategy::StopHeartbeats() {
  if (heartbeats_ != nullptr) heartbeats_->Stop();
}

absl::Status ParameterServerStrategy::SendHeartbeat() {
  absl::MutexLock lock(&heartbeat_mu_);
  // The chief's layout goes out with its heartbeats; every worker's brings
  // back the chief's latest (PipelineTuning: one layout for the cluster).
  const std::optional<ChiefLayout> mine = tuning_ != nullptr ? tuning_->Published() : std::nullopt;
  PSTRAIN_ASSIGN_OR_RETURN(const ChiefLayout chief, client_->Heartbeat(current_step_.load(), finished_pushing_.load(),
                                                                       paused_.load(), mine ? &*mine : nullptr));
  if (tuning_ != nullptr) tuning_->Heard(chief);
  return absl::OkStatus();
}

std::string ParameterServerStrategy::Describe() const {
  const ExperimentConfig& c = *context_.config;
  std::string consistency = c.consistency();
  if (consistency == "ssp") absl::StrAppend(&consistency, " staleness ", c.staleness());
  // How a worker's devices combine their gradients: said only when it has several.
  const std::string local_reduce =
      c.devices_per_worker() > 1 ? absl::StrCat(", local reduce ", local_reduce_spec_) : std::string();
  return absl::StrCat(name_, " (", consistency, ", ", c.cluster().ps_hosts_size(), " PS, ", c.transport(),
                      ", placement ", c.placement(), local_reduce,
                      c.compression() == "none" ? "" : absl::StrCat(", compression ", c.compression()),
                      pipeline_ != nullptr ? ", pipeline" : "", ")");
}

StrategyTraffic ParameterServerStrategy::traffic() const {
  StrategyTraffic traffic;
  traffic.bytes_pushed = client_->bytes_pushed();
  traffic.bytes_pulled = client_->bytes_pulled();
  traffic.wait = pipeline_ != nullptr ? pull_wait_ + pipeline_->wait_time() : pull_wait_;
  traffic.dropped_gradients = dropped_;
  return traffic;
}

absl::StatusOr<std::optional<RestorePoint>> ParameterServerStrategy::InstallState(absl::Duration wait,
                                                                                  bool recovering) {
  std::optional<RestorePoint> restore;
  if (checkpoints_ != nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(restore, checkpoints_->FindRestorePoint());
  }
  // Without a checkpoint a recovery starts over from the initial values.
  if (!restore && recovering) context_.replicas->InitializeVariables(context_.config->train().init_seed());
  const std::optional<LedgerSpec> ledger = LedgerToInstall(restore);
  PSTRAIN_RETURN_IF_ERROR(
      client_->Init(context_.total_steps, restore ? &restore->shards : nullptr, wait, ledger ? &*ledger : nullptr));
  if (restore) {
    std::cout << "Resuming from checkpoint " << restore->dir << " at step " << restore->manifest.step()
              << " (data position " << restore->manifest.data_position() << " examples)" << std::endl;
  }
  LOG(INFO) << "chief: initialised " << context_.replicas->variables(0).size() << " variables on "
            << client_->num_shards() << " PS shards at generation " << client_->generation()
            << (restore ? " from " + restore->dir : "");
  return restore;
}

absl::Status ParameterServerStrategy::JoinShards(int64_t min_generation, absl::Duration wait, bool starting) {
  PSTRAIN_ASSIGN_OR_RETURN(const PsClient::JoinInfo info, client_->Join(min_generation, wait));
  pulled_version_ = info.version;
  pulled_at_start_ = true;
  start_step_ = info.resumed_step;
  if (starting && context_.worker_index != 0 && (info.rejoined || (WorkersJoin() && info.version > start_step_))) {
    // This worker's previous process died, or it joins a run under way; the
    // others went on (sync: they wait for this worker's gradients of the
    // step being aggregated).
    start_step_ = context_.config->consistency() == "sync" ? info.version : info.worker_steps;
    std::cout << "worker " << context_.worker_index << ": " << (info.rejoined ? "rejoining" : "joining")
              << " the run at step " << start_step_
              << (info.rejoined ? " (this worker's previous process was lost)" : " (it was under way)") << std::endl;
  }
  context_.replicas->BroadcastValues(0);
  if (pipeline_ != nullptr) pipeline_->ValuesInPlace(pulled_version_);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParameterServerStrategy::Start() {
  const ExperimentConfig& config = *context_.config;
  const absl::Duration startup = absl::Seconds(config.timeouts().startup_seconds());
  // The first pull waits for the PS to come up and the chief's Init, and
  // says where the run starts.
  int64_t min_generation = 1;
  bool restored = false;
  if (context_.worker_index == 0) {
    PSTRAIN_ASSIGN_OR_RETURN(checkpoints_, CheckpointManager::Create(config, client_->parts(), client_->num_shards()));
    PSTRAIN_ASSIGN_OR_RETURN(std::optional<RestorePoint> restore, InstallState(startup, /*recovering=*/false));
    restored = restore.has_value();
    min_generation = client_->generation();
  }
  PSTRAIN_RETURN_IF_ERROR(JoinShards(min_generation, startup, /*starting=*/true));
  PSTRAIN_RETURN_IF_ERROR(WaitForMinWorkers(startup));
  if (start_step_ >= context_.total_steps && context_.ledger == nullptr) {
    // Nothing left to train: the run reports (and the chief evaluates) the
    // checkpoint's parameters, and ends as a finished run does.
    std::cout << "worker " << context_.worker_index << ": training already complete: the checkpoint's step "
              << start_step_ << " is the run's last (" << context_.total_steps
              << "); raise train.steps or epochs to train further" << std::endl;
  }
  if (checkpoints_ != nullptr) {
    checkpoints_->MarkStart(start_step_, absl::Now());
    // With recovery on, there is always a checkpoint to go back to.
    if (!restored && config.timeouts().ps_recover_seconds() > 0 && !checkpoints_->dir().empty()) {
      PSTRAIN_RETURN_IF_ERROR(SaveCheckpoint(start_step_));
    }
  }
  if (pipeline_ != nullptr) {
    context_.replicas->UploadValuesOnWait();  // GPU replicas: layer by layer, as pulls land
    for (int r = 0; r < context_.replicas->size(); ++r)
      context_.replicas->model(r).SetVariableWait(pipeline_->WaitFor(r));
  }
  const absl::Duration period = absl::Seconds(config.timeouts().heartbeat_seconds());
  heartbeats_ = std::make_unique<PeriodicThread>(period, [this] {
    absl::Status s = SendHeartbeat();
    if (!s.ok()) LOG(WARNING) << "heartbeat: " << s.message();
  });
  return start_step_;
}

absl::StatusOr<int64_t> ParameterServerStrategy::Recover(const absl::Status& failure) {
  const ExperimentConfig& config = *context_.config;
  const float limit = config.timeouts().ps_recover_seconds();
  if (limit <= 0 || !IsShardLostOrRestored(failure)) return failure;
  const absl::Duration wait = absl::Seconds(limit);
  const absl::Time recovery_start = absl::Now();
  const int worker = context_.worker_index;
  std::cout << "worker " << worker << ": " << failure.message() << "\nworker " << worker << ": waiting up to "
            << absl::FormatDuration(wait) << " (timeouts.ps_recover_seconds) for the parameter servers to recover"
            << std::endl;
  auto failed = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("recovery after \"", failure.message(), "\" failed: ", s.message()));
  };
  // Answers of the abandoned step must not land on the state joined next.
  if (pipeline_ != nullptr) pipeline_->Abandon();
  if (worker == 0) {
    absl::StatusOr<std::optional<RestorePoint>> restore = InstallState(wait, /*recovering=*/true);
    if (!restore.ok()) return failed(restore.status());
    if (absl::Status s = JoinShards(client_->generation(), wait, /*starting=*/false); !s.ok()) return failed(s);
    Recovery recovery;
    recovery.set_restored_step(start_step_);
    recovery.set_failure(std::string(failure.message()));
    recoveries_.push_back(recovery);
    std::cout << "Recovered: every PS shard restored "
              << (restore->has_value() ? absl::StrCat("from checkpoint ", (*restore)->dir)
                                       : std::string("from the initial values (no committed checkpoint)"))
              << " at step " << start_step_ << " (generation " << client_->generation() << ")" << std::endl;
  } else {
    if (absl::Status s = JoinShards(client_->generation() + 1, wait, /*starting=*/false); !s.ok()) return failed(s);
    std::cout << "worker " << worker << ": continuing from step " << start_step_ << " (generation "
              << client_->generation() << ")" << std::endl;
  }
  if (checkpoints_ != nullptr) checkpoints_->MarkStart(start_step_, absl::Now());
  if (context_.timeline != nullptr) context_.timeline->Record("recovery", "phases", recovery_start, absl::Now());
  return start_step_;
}

absl::Status ParameterServerStrategy::BeforePipelinedStep(int64_t step) {
  pulled_at_start_ = false;
  if (tuning_ != nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(const std::optional<int64_t> version, tuning_->BeforeStep(step));
    if (version) pulled_version_ = *version;
  }
  // The values arrive during the forward; a checkpoint needs them all.
  if (checkpoints_ != nullptr && checkpoints_->Due(step, absl::Now())) {
    const absl::Time t = absl::Now();
    PSTRAIN_ASSIGN_OR_RETURN(pulled_version_, pipeline_->WaitForPulls());
    PSTRAIN_RETURN_IF_ERROR(SaveCheckpoint(step));
    if (context_.timeline != nullptr) context_.timeline->Record("checkpoint", "phases", t, absl::Now());
  }
  pipeline_->BeginStep(step);
  return absl::OkStatus();
}

absl::Status ParameterServerStrategy::BeforeStep(int64_t step) {
  const ExperimentConfig& config = *context_.config;
  current_step_ = step;
  step_start_ = absl::Now();
  wait_at_step_start_ = traffic().wait;
  if (pipeline_ != nullptr) return BeforePipelinedStep(step);
  if (pulled_at_start_) {
    pulled_at_start_ = false;  // Start pulled this step's values
  } else {
    const bool sync = config.consistency() == "sync";
    const int64_t want = sync ? pulled_version_ + 1 : 0;
    const absl::Duration timeout =
        absl::Seconds(config.timeouts().sync_step_seconds() + config.timeouts().rpc_seconds());
    const absl::Time start = absl::Now();
    PSTRAIN_ASSIGN_OR_RETURN(pulled_version_, client_->Pull(want, timeout, /*wait_for_ready=*/false, step));
    const absl::Time pulled = absl::Now();
    pull_wait_ += pulled - start;
    if (Timeline* timeline = context_.timeline) {
      timeline->Record("pull", "phases", start, pulled,
                       absl::StrCat(R"("min_version": )", want, R"(, "version": )", pulled_version_));
    }
    context_.replicas->BroadcastValues(0);
    if (checkpoints_ != nullptr && checkpoints_->Due(step, absl::Now())) {
      const absl::Time t = absl::Now();
      PSTRAIN_RETURN_IF_ERROR(SaveCheckpoint(step));
      if (context_.timeline != nullptr) context_.timeline->Record("checkpoint", "phases", t, absl::Now());
    }
  }
  if (overlap_) {
    absl::MutexLock lock(&overlap_mu_);
    step_ = step;
    ready_.assign(context_.replicas->variables(0).size(), false);
    sent_.assign(batch_variables_.size(), false);
    acknowledged_ = 0;
    step_dropped_ = 0;
    push_error_ = absl::OkStatus();
  }
  return absl::OkStatus();
}

GradientReadyHook ParameterServerStrategy::HookFor(int replica) {
  if (pipeline_ != nullptr) return pipeline_->HookFor(replica);
  if (!overlap_) return nullptr;
  return [this](int variable) {
    std::vector<int> batches;
    {
      absl::MutexLock lock(&overlap_mu_);
      ready_[variable] = true;
      batches = TakeReadyBatches();
    }
    SendBatches(batches);
  };
}

std::vector<int> ParameterServerStrategy::TakeReadyBatches() {
  std::vector<int> batches;
  for (size_t b = 0; b < batch_variables_.size(); ++b) {
    if (sent_[b]) continue;
    bool all_ready = true;
    for (int v : batch_variables_[b]) all_ready = all_ready && ready_[v];
    if (!all_ready) continue;
    sent_[b] = true;
    batches.push_back(static_cast<int>(b));
  }
  return batches;
}

void ParameterServerStrategy::SendBatches(const std::vector<int>& batches) {
  for (int b : batches) {
    const absl::Time sent = absl::Now();
    client_->PushBatchAsync(b, pulled_version_, step_, [this, b, sent](absl::Status status, int dropped) {
      if (Timeline* timeline = context_.timeline) {
        timeline->Record(absl::StrCat("push batch ", b), absl::StrCat("push batch ", b), sent, absl::Now(),
                         absl::StrCat(R"("variables": )", batch_variables_[b].size(), R"(, "ok": )",
                                      status.ok() ? "true" : "false"));
      }
      absl::MutexLock lock(&overlap_mu_);
      if (!status.ok() && push_error_.ok()) push_error_ = status;
      step_dropped_ += dropped;
      ++acknowledged_;
    });
  }
}

absl::Status ParameterServerStrategy::AfterStep(int64_t step) {
  const absl::Status pushed = Push(step);
  // The step's busy time (its wall time less what it waited for others)
  // goes with the next step's pushes: how the shards tell stragglers.
  const absl::Duration busy = (absl::Now() - step_start_) - (traffic().wait - wait_at_step_start_);
  client_->pace().set_busy_seconds(std::max(0.0, absl::ToDoubleSeconds(busy)));
  return pushed;
}

absl::Status ParameterServerStrategy::Push(int64_t step) {
  if (pipeline_ != nullptr) {
    const absl::Time start = absl::Now();
    PSTRAIN_ASSIGN_OR_RETURN(const int dropped, pipeline_->FinishStep());
    if (context_.timeline != nullptr) context_.timeline->Record("wait for pushes", "phases", start, absl::Now());
    dropped_ += dropped;
    return absl::OkStatus();
  }
  if (overlap_) {
    std::vector<int> batches;
    {
      absl::MutexLock lock(&overlap_mu_);
      ready_.assign(ready_.size(), true);  // every gradient is final now
      batches = TakeReadyBatches();
    }
    SendBatches(batches);
    const absl::Time start = absl::Now();
    absl::MutexLock lock(&overlap_mu_);
    overlap_mu_.Await(absl::Condition(
        +[](ParameterServerStrategy* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return s->acknowledged_ == static_cast<int>(s->batch_variables_.size());
        },
        this));
    if (context_.timeline != nullptr) context_.timeline->Record("wait for pushes", "phases", start, absl::Now());
    dropped_ += step_dropped_;
    return push_error_;
  }
  const absl::Time start = absl::Now();
  PSTRAIN_RETURN_IF_ERROR(ReduceGradients(local_reduce_spec_, *context_.replicas));
  const absl::Time reduced = absl::Now();
  PSTRAIN_ASSIGN_OR_RETURN(int dropped, client_->Push(pulled_version_, step));
  if (Timeline* timeline = context_.timeline) {
    timeline->Record("sum replicas", "phases", start, reduced);
    timeline->Record("push", "phases", reduced, absl::Now());
  }
  dropped_ += dropped;
  return absl::OkStatus();
}

absl::Status ParameterServerStrategy::SaveCheckpoint(int64_t step) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> paths, checkpoints_->PrepareShardPaths(step));
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<CheckpointResponse> written,
                           client_->Checkpoint(step, paths, checkpoints_->TablesSinceStep()));
  PSTRAIN_ASSIGN_OR_RETURN(const std::optional<LedgerState> ledger, LedgerAt(step));
  return checkpoints_->Commit(step, written, absl::Now(), ledger ? &*ledger : nullptr);
}

absl::StatusOr<ClusterReport> ParameterServerStrategy::Finish(const WorkerReport& mine) {
  // The last step's values land before anything reads or replaces them.
  if (pipeline_ != nullptr) PSTRAIN_RETURN_IF_ERROR(pipeline_->WaitForPulls().status());
  // No more pushes from here: tell the shards now, so sync steps with backup
  // workers stop waiting for this one. Heartbeats go on while the chief waits.
  finished_pushing_ = true;
  PSTRAIN_RETURN_IF_ERROR(SendHeartbeat());
  ClusterReport report;
  report.workers.push_back(mine);
  if (context_.worker_index != 0) {
    StopHeartbeats();
    PSTRAIN_RETURN_IF_ERROR(client_->Done(mine));
    return report;
  }
  // Chief: wait for every other worker's report (a lost worker is reported by
  // the PS: a sync PS exits, an async/ssp PS lists it as lost).
  while (true) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<StatsResponse> stats, client_->Stats());
    const StatsResponse& s0 = stats[0];
    // Workers that never came (elastic) are not waited for.
    if (s0.done_size() + s0.lost_size() + s0.absent_size() >= context_.num_workers - 1) {
      for (const WorkerReport& r : s0.done()) report.workers.push_back(r);
      report.lost_workers.assign(s0.lost().begin(), s0.lost().end());
      AddMembership(s0, &report);
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  const ExperimentConfig& config = *context_.config;
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t version, client_->Pull(0, absl::Seconds(config.timeouts().sync_step_seconds() +
                                                                                 config.timeouts().rpc_seconds())));
  // The end of the run is a checkpoint too (every update has been applied).
  // With dynamic sharding the run's length is the ledger's, not the steps'.
  if (checkpoints_ != nullptr && !checkpoints_->dir().empty()) {
    PSTRAIN_RETURN_IF_ERROR(SaveCheckpoint(context_.ledger != nullptr ? version : context_.total_steps));
  }
  if (context_.before_chief_done) context_.before_chief_done();  // heartbeats still going
  // The shards' load as they end it, the final read and evaluation included
  // (what each shard logs as it exits).
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<StatsResponse> final_stats, client_->Stats());
  report.ps_load.clear();
  for (const StatsResponse& s : final_stats) report.ps_load.push_back(s.load());
  StopHeartbeats();
  PSTRAIN_RETURN_IF_ERROR(client_->Done(mine));
  return report;
}

namespace {

// parameter_server (tf_cnn_benchmarks' default): variables on the PS shards;
// each worker sums its replicas' gradients (on the host, or with
// local_parameter_device gpu on the GPU that owns each variable) and pushes
// once.
StrategyNeeds Needs(const ExperimentConfig& c) {
  StrategyNeeds needs;
  needs.parameter_servers = true;
  // local_parameter_device gpu: the sum is formed on the owner GPUs
  // (local_reduce.h) and only it is downloaded.
  const bool on_devices = c.device() == "gpu" || EmulatedTopology(c);
  needs.download_gradients = !(on_devices && c.local_parameter_device() == "gpu" && c.devices_per_worker() > 1);
  return needs;
}

absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context) {
  const bool on_gpus = !context.replicas->downloads_gradients();
  return ParameterServerStrategy::Create(context, "parameter_server", on_gpus ? "owner_device" : "pscpu");
}

const bool kRegistered = StrategyRegistry().Register(
    "parameter_server",
    {
        .summary = "variables on parameter servers; each worker sums its devices' gradients and pushes once",
        .all_reduce_specs = {},
        .local_parameter_device_gpu = true,
        .compressions = {"fp16", "bf16", "topk"},
        .needs = Needs,
        .check = nullptr,
        .create = Create,
    });

}  // namespace
}  // namespace pstrain
