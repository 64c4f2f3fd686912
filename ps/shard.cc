#include "ps/shard.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/compression/compression.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "glog/logging.h"
#include "ps/push_decoder.h"
#include "ps/shard/request_checks.h"
#include "ps/shard_checkpoint.h"

namespace pstrain {
absl::StatusOr<std::unique_ptr<PsShard>> PsShard::Create(const PsShardOptions& options) {
  if (options.num_workers <= 0) return absl::InvalidArgumentError("PS shard needs at least one worker");
  // The optimizer is created at Init (when the run's length is known); an
  // unknown name is refused now.
  PSTRAIN_RETURN_IF_ERROR(CreateOptimizer(options.optimizer).status());
  PSTRAIN_RETURN_IF_ERROR(LearningRateSchedule::Create(options.optimizer, 0).status());
  WorkerRoster roster(options.num_workers, absl::Now());
  ConsistencyOptions consistency;
  consistency.shard_index = options.shard_index;
  consistency.num_workers = options.num_workers;
  consistency.replicas_to_aggregate = options.replicas_to_aggregate;
  consistency.staleness = options.staleness;
  consistency.timeouts = options.timeouts;
  consistency.departed = roster.departed();
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ConsistencyPolicy> policy,
                           CreateConsistencyPolicy(options.consistency, consistency));
  return std::unique_ptr<PsShard>(new PsShard(options, std::move(policy), std::move(roster)));
}

PsShard::PsShard(const PsShardOptions& options, std::unique_ptr<ConsistencyPolicy> policy, WorkerRoster roster)
    : options_(options),
      policy_(std::move(policy)),
      store_(options.shard_index),
      parked_(options.shard_index, absl::Seconds(options.timeouts.rpc_seconds())),
      roster_(std::move(roster)) {}

PsShard::~PsShard() { CancelPendingPulls(absl::CancelledError("PS shard shutting down")); }

void PsShard::CancelPendingPulls(const absl::Status& status) {
  std::vector<PullAnswer> answers;
  {
    absl::MutexLock lock(&mu_);
    answers = parked_.TakeAll(status);
  }
  SendAll(std::move(answers));
}

absl::Status PsShard::ValidateWorker(int worker, const char* what) const {
  if (worker < 0 || worker >= options_.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": worker ", worker, " out of range [0, ", options_.num_workers, ")"));
  }
  return absl::OkStatus();
}

void PsShard::NoteIncarnation(int worker, uint64_t incarnation) {
  if (!roster_.NoteIncarnation(worker, incarnation)) return;
  // Gradients the old process pushed for steps still being aggregated may
  // arrive again from the new one (the same step, the same data): they are
  // dropped, not refused as duplicates.
  const int64_t newest = store_.NewestVersion();
  const bool was_lost = roster_.Rejoin(worker, newest + 1, absl::Now());
  LOG(WARNING) << "shard " << options_.shard_index << ": worker " << worker
               << " rejoined (a new process); its repeated gradients for steps below " << newest + 1 << " are dropped"
               << (was_lost ? "; it is no longer lost" : "");
}

absl::StatusOr<PullState> PsShard::TryServePull(const PullRequest& request, OutgoingFrame* response) {
  PSTRAIN_RETURN_IF_ERROR(store_.CheckGeneration(request.generation()));
  if (!store_.initialized() || store_.generation() < std::max<int64_t>(1, request.min_generation())) {
    return PullState::kWaitingForVersions;
  }
  std::vector<ShardVariable*> vars;
  if (request.names().empty()) {
    for (auto& [name, var] : store_.variables()) vars.push_back(var.get());
  } else {
    for (const std::string& name : request.names()) {
      ShardVariable* var = store_.Find(name);
      if (var == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("pull: unknown variable '", name, "' on shard ", options_.shard_index));
      }
      vars.push_back(var);
    }
  }
  for (ShardVariable* var : vars) {
    if (var->version.load() < request.min_version()) return PullState::kWaitingForVersions;
  }
  const WireDType dtype = request.value_dtype();
  if (WireDTypeSize(dtype) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("pull: unknown value_dtype ", dtype));
  }
  if (!policy_->PullBlockers(request, roster_.progress()).empty()) return PullState::kBlockedByPolicy;
  PullResponse header;
  for (ShardVariable* var : vars) {
    absl::MutexLock lock(&var->mu);
    TensorHeader* h = header.add_tensors();
    h->set_name(var->name);
    for (int64_t d : var->shape) h->add_shape(d);
    h->set_dtype(dtype);
    header.add_versions(var->version.load());
    if (dtype == DT_FLOAT32) {
      h->set_num_bytes(var->bytes());
      response->chunks.push_back({var->value->data(), var->bytes(), var->value});
    } else {
      const std::shared_ptr<Buffer> encoded = EncodedValue(*var, dtype);
      h->set_num_bytes(encoded->size());
      response->chunks.push_back({encoded->data(), encoded->size(), encoded});
    }
  }
  header.set_resumed_step(resumed_step_);
  header.set_generation(store_.generation());
  if (request.min_generation() > 0) {  // a worker joining: where it stands
    header.set_rejoined(roster_.rejoined(request.worker()));
    header.set_worker_steps(roster_.progress().completed_steps[request.worker()]);
  }
  header.SerializeToString(&response->header);
  bytes_out_ += response->payload_bytes();
  return PullState::kReady;
}

std::shared_ptr<Buffer> PsShard::EncodedValue(ShardVariable& var, WireDType dtype) {
  const int64_t version = var.version.load();
  if (var.encoded == nullptr || var.encoded_dtype != dtype || var.encoded_version != version) {
    // A new buffer each time: pulls of the previous version may still hold
    // the old one.
    var.encoded = Buffer::AllocateUninitialized(static_cast<size_t>(var.n) * WireDTypeSize(dtype));
    EncodeFloats(dtype, static_cast<const float*>(var.value->data()), static_cast<size_t>(var.n), var.encoded->data());
    var.encoded_dtype = dtype;
    var.encoded_version = version;
  }
  return var.encoded;
}

void PsShard::Pull(const PullRequest& request, Responder respond) {
  if (absl::Status s = ValidateWorker(request.worker(), "pull"); !s.ok()) {
    respond(s, {});
    return;
  }
  OutgoingFrame response;
  absl::StatusOr<PullState> state;
  {
    // Check-and-park under mu_, so an update that lands in between wakes us.
    absl::MutexLock lock(&mu_);
    NoteIncarnation(request.worker(), request.incarnation());
    state = TryServePull(request, &response);
    if (state.ok() && *state != PullState::kReady) {
      parked_.Park(request, std::move(respond), *state, absl::Now());
      return;
    }
  }
  if (!state.ok()) {
    respond(state.status(), {});
  } else {
    respond(absl::OkStatus(), std::move(response));
  }
}

void PsShard::WakePulls() {
  std::vector<PullAnswer> answers;
  {
    absl::MutexLock lock(&mu_);
    answers = parked_.Retry(
        [this](const PullRequest& request, OutgoingFrame* response) {
          mu_.AssertHeld();  // Retry runs under the lock taken above
          return TryServePull(request, response);
        },
        [this](absl::Duration waited) { policy_->RecordWaitedPull(waited); });
  }
  SendAll(std::move(answers));
}

absl::StatusOr<std::vector<bool>> PsShard::CheckPushAgainstState(const std::vector<ShardVariable*>& vars, int worker,
                                                                 int64_t step, int64_t repeats_below) const {
  std::vector<bool> repeated(vars.size(), false);
  for (size_t i = 0; i < vars.size(); ++i) {
    ShardVariable* var = vars[i];
    var->mu.AssertHeld();
    if (step < 0 || step > var->version.load()) {
      return absl::InvalidArgumentError(absl::StrCat("push: step ", step, " of ", var->name,
                                                     " is ahead of the variable (version ", var->version.load(), ")"));
    }
    if (step < repeats_below && policy_->HasGradientFrom(*var, worker, step)) {
      repeated[i] = true;
      continue;
    }
    PSTRAIN_RETURN_IF_ERROR(policy_->CheckPush(*var, worker, step));
  }
  return repeated;
}

absl::Status PsShard::Push(const PushRequest& request, IncomingFrame& payload, PushResponse* response) {
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(request.worker(), "push"));
  if (!store_.initialized()) {
    PSTRAIN_RETURN_IF_ERROR(store_.CheckGeneration(request.generation()));  // a restarted shard
    return absl::FailedPreconditionError("push before the chief initialised the variables");
  }
  const int worker = request.worker();
  const int64_t step = request.step();
  int64_t repeats_below = 0;
  {
    absl::MutexLock lock(&mu_);
    NoteIncarnation(worker, request.incarnation());
    repeats_below = roster_.repeats_below(worker);
  }

  // Validation: nothing changes unless the whole request is well formed.
  // First what needs no lock...
  uint64_t declared = 0;
  std::vector<ShardVariable*> vars;
  std::set<std::string> names;
  for (const TensorHeader& h : request.tensors()) {
    ShardVariable* found = store_.Find(h.name());
    if (found == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("push: unknown variable '", h.name(), "' on shard ", options_.shard_index));
    }
    ShardVariable& var = *found;
    PSTRAIN_RETURN_IF_ERROR(CheckTensorHeader(h, var.shape, var.n, "push", /*encoded=*/true));
    if (!names.insert(h.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("push: variable ", h.name(), " given twice"));
    }
    declared += h.num_bytes();
    vars.push_back(&var);
  }
  PSTRAIN_RETURN_IF_ERROR(CheckPayloadSize(payload, declared, "push"));
  // Compressed tensors are expanded to float32 (and their encoding checked)
  // before any lock is taken or anything changes.
  std::vector<IncomingFrame> decoded;
  if (PushIsEncoded(request)) {
    std::vector<int64_t> elements;
    for (const ShardVariable* var : vars) elements.push_back(var->n);
    PSTRAIN_ASSIGN_OR_RETURN(decoded, DecodePushTensors(request, elements, payload));
  }
  // ...then the variables' state, with every lock of this push held until
  // the update is done, so two pushes cannot both pass the checks and then
  // both apply.
  VariableLocks locks(vars);
  // Under the locks: a restore changes every variable with all of them held.
  PSTRAIN_RETURN_IF_ERROR(store_.CheckGeneration(request.generation()));
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<bool> repeated, CheckPushAgainstState(vars, worker, step, repeats_below));
  bytes_in_ += declared;

  bool applied_any = false;
  int accepted = 0, dropped = 0;
  for (size_t t = 0; t < vars.size(); ++t) {  // in request order: the payload's order
    ShardVariable* var = vars[t];
    var->mu.AssertHeld();
    const absl::Time t0 = absl::Now();
    IncomingFrame& gradient = decoded.empty() ? payload : decoded[t];
    PushOutcome outcome = PushOutcome::kDropped;
    if (repeated[t]) {
      PSTRAIN_RETURN_IF_ERROR(gradient.Consume(var->bytes(), [](const char*, size_t) {}));
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(outcome, policy_->Push(*var, worker, step, gradient, store_.updater()));
    }
    apply_nanos_ += absl::ToInt64Nanoseconds(absl::Now() - t0);
    switch (outcome) {
      case PushOutcome::kApplied:
        ++applied_updates_;
        applied_any = true;
        ++accepted;
        break;
      case PushOutcome::kAccumulated:
        ++accepted;
        break;
      case PushOutcome::kDropped:
        ++dropped;
        ++dropped_gradients_;
        LOG(INFO) << "shard " << options_.shard_index << ": dropped gradient of " << var->name << " from worker "
                  << worker << " for step " << step
                  << (repeated[t] ? " (repeated by its restarted process)"
                                  : absl::StrCat(" (already applied, version ", var->version.load(), ")"));
        break;
    }
  }
  response->set_accepted(accepted);
  response->set_dropped_stale(dropped);
  locks.Release();
  {
    absl::MutexLock lock(&mu_);
    roster_.Pushed(worker, absl::Now(), step, request.local_step());
  }
  if (applied_any) WakePulls();
  return absl::OkStatus();
}

absl::Status PsShard::Heartbeat(const HeartbeatRequest& request) {
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(request.worker(), "heartbeat"));
  bool departed = false;
  {
    absl::MutexLock lock(&mu_);
    NoteIncarnation(request.worker(), request.incarnation());
    roster_.Heard(request.worker(), absl::Now(), request.step());
    departed = request.finished_pushing() && roster_.FinishedPushing(request.worker());
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
  PSTRAIN_ASSIGN_OR_RETURN(CheckpointResponse response,
                           WriteShardCheckpoint(request.path(), options_.shard_index, request.step(),
                                                options_.optimizer.name(), store_.variables()));
  LOG(INFO) << "shard " << options_.shard_index << ": checkpoint of step " << request.step() << " written to "
            << request.path() << " (" << response.bytes() << " bytes in " << absl::FormatDuration(absl::Now() - start)
            << ")";
  return response;
}

absl::Status PsShard::Done(const DoneRequest& request) {
  const int worker = request.report().worker();
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(worker, "done"));
  {
    absl::MutexLock lock(&mu_);
    if (!roster_.Done(worker, request.report())) return absl::OkStatus();
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

StatsResponse PsShard::Stats() const {
  StatsResponse stats;
  ShardLoad* load = stats.mutable_load();
  {
    absl::MutexLock lock(&mu_);
    for (const WorkerReport& r : roster_.reports()) *stats.add_done() = r;
    for (int w : roster_.Lost()) stats.add_lost(w);
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
  return stats;
}

std::string PsShard::DescribeWait(const PullRequest& request) const {
  if (!store_.initialized()) return "variables not initialised yet (waiting for Init from the chief, worker 0)";
  if (store_.generation() < request.min_generation()) {
    return absl::StrCat("the chief's restore of this shard (generation ", request.min_generation(), "; now ",
                        store_.generation(), ")");
  }
  if (std::vector<int> blockers = policy_->PullBlockers(request, roster_.progress()); !blockers.empty()) {
    return policy_->DescribeBlockers(request, blockers);
  }
  for (const auto& [name, var] : store_.variables()) {
    if (!request.names().empty() &&
        std::find(request.names().begin(), request.names().end(), name) == request.names().end()) {
      continue;
    }
    if (var->version.load() >= request.min_version()) continue;
    absl::MutexLock lock(&var->mu);
    std::string why = absl::StrCat(name, " is at version ", var->version.load());
    if (std::string more = policy_->DescribeVariableWait(*var); !more.empty()) absl::StrAppend(&why, "; ", more);
    return why;
  }
  return "nothing (ready)";
}

absl::Status PsShard::Check(absl::Time now) {
  // 1. Expire pulls.
  std::vector<PullAnswer> expired;
  {
    absl::MutexLock lock(&mu_);
    expired = parked_.TakeExpired(now, [this](const PullRequest& request) {
      mu_.AssertHeld();  // TakeExpired runs under the lock taken above
      return DescribeWait(request);
    });
  }
  for (PullAnswer& answer : expired) {
    LOG(WARNING) << answer.status.message();
    std::move(answer).Send();
  }

  // 2. Steps waiting too long.
  if (store_.initialized()) {
    for (const auto& [name, var] : store_.variables()) {
      absl::MutexLock lock(&var->mu);
      PSTRAIN_RETURN_IF_ERROR(policy_->CheckStalled(*var, now));
    }
  }

  // 3. Lost workers.
  std::vector<int> newly_lost;
  // Under a policy that cannot go on without a worker: every worker over
  // its limit, the longest silent first. The shard cannot tell a dead
  // worker from a live one whose heartbeats did not get through, so it
  // names all it has not heard from rather than the lowest index.
  std::vector<std::pair<absl::Duration, std::string>> fatal;
  {
    absl::MutexLock lock(&mu_);
    for (WorkerRoster::Silent& s : roster_.SilentWorkers(now, absl::Seconds(options_.timeouts.worker_lost_seconds()),
                                                         absl::Seconds(options_.timeouts.startup_seconds()))) {
      if (policy_->LostWorkerIsFatal()) {
        fatal.emplace_back(s.silent, std::move(s.what));
        continue;
      }
      roster_.Lose(s.worker);
      newly_lost.push_back(s.worker);
      LOG(WARNING) << "shard " << options_.shard_index << ": " << s.what << "; " << options_.consistency
                   << " training continues without it";
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
  return roster_.AllDoneOrLost();
}

int64_t PsShard::MinVersion() const { return store_.MinVersion(); }

std::vector<int> PsShard::LostWorkers() const {
  absl::MutexLock lock(&mu_);
  return roster_.Lost();
}

}  // namespace pstrain
