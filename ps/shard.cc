#include "ps/shard.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "glog/logging.h"

namespace pstrain {

struct PsShard::Variable {
  std::string name;
  Shape shape;
  int64_t n = 0;

  absl::Mutex mu;
  std::shared_ptr<Buffer> value ABSL_GUARDED_BY(mu);  // published, never written again
  std::shared_ptr<Buffer> spare ABSL_GUARDED_BY(mu);  // previous value, reused when unshared
  std::vector<std::vector<float>> slots ABSL_GUARDED_BY(mu);
  std::atomic<int64_t> version{0};

  // sync only: the step being aggregated.
  std::vector<float> accum ABSL_GUARDED_BY(mu);
  std::vector<bool> contributed ABSL_GUARDED_BY(mu);
  int contributors ABSL_GUARDED_BY(mu) = 0;
  absl::Time first_arrival ABSL_GUARDED_BY(mu);

  size_t bytes() const { return static_cast<size_t>(n) * sizeof(float); }
};

namespace {

absl::Status CheckTensorHeader(const TensorHeader& h, const Shape& expected_shape, int64_t expected_n,
                               const char* what) {
  Shape shape(h.shape().begin(), h.shape().end());
  if (h.dtype() != DT_FLOAT32) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", h.name(), ": dtype must be float32"));
  }
  if (shape != expected_shape) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", h.name(), ": shape ", ShapeToString(shape),
                                                   " but the variable is ", ShapeToString(expected_shape)));
  }
  if (h.num_bytes() != static_cast<uint64_t>(expected_n) * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", h.name(), ": ", h.num_bytes(),
                                                   " bytes but the variable needs ", expected_n * sizeof(float)));
  }
  return absl::OkStatus();
}

absl::Status CheckPayloadSize(const IncomingFrame& payload, uint64_t declared, const char* what) {
  if (payload.payload_bytes() != declared) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": headers declare ", declared, " payload bytes but ",
                                                   payload.payload_bytes(), " arrived"));
  }
  return absl::OkStatus();
}

}  // namespace

// Holds the locks of several variables, taken in name order.
class PsShard::VariableLocks {
 public:
  explicit VariableLocks(std::vector<Variable*> vars) : vars_(std::move(vars)) {
    std::sort(vars_.begin(), vars_.end(), [](const Variable* a, const Variable* b) { return a->name < b->name; });
    for (Variable* v : vars_) v->mu.Lock();
  }
  ~VariableLocks() { Release(); }
  void Release() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (auto it = vars_.rbegin(); it != vars_.rend(); ++it) (*it)->mu.Unlock();
    vars_.clear();
  }

 private:
  std::vector<Variable*> vars_;
};

absl::StatusOr<std::unique_ptr<PsShard>> PsShard::Create(const PsShardOptions& options) {
  if (options.num_workers <= 0) return absl::InvalidArgumentError("PS shard needs at least one worker");
  if (options.consistency != "sync" && options.consistency != "async" && options.consistency != "ssp") {
    return absl::InvalidArgumentError(absl::StrCat("unknown consistency '", options.consistency, "'"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, CreateOptimizer(options.optimizer));
  return std::unique_ptr<PsShard>(new PsShard(options, std::move(optimizer)));
}

PsShard::PsShard(const PsShardOptions& options, std::unique_ptr<Optimizer> optimizer)
    : options_(options),
      replicas_(options.replicas_to_aggregate > 0 ? options.replicas_to_aggregate : options.num_workers),
      departed_(new std::atomic<bool>[options.num_workers]),
      optimizer_(std::move(optimizer)),
      start_time_(absl::Now()) {
  for (int w = 0; w < options.num_workers; ++w) departed_[w] = false;
  absl::MutexLock lock(&mu_);
  last_seen_.assign(options.num_workers, start_time_);
  last_step_.assign(options.num_workers, -1);
  completed_steps_.assign(options.num_workers, 0);
  seen_.assign(options.num_workers, false);
  done_.assign(options.num_workers, false);
  lost_.assign(options.num_workers, false);
}

PsShard::~PsShard() { CancelPendingPulls(absl::CancelledError("PS shard shutting down")); }

void PsShard::CancelPendingPulls(const absl::Status& status) {
  std::vector<PendingPull> pending;
  {
    absl::MutexLock lock(&mu_);
    pending.swap(pending_);
  }
  for (PendingPull& p : pending) p.respond(status, {});
}

absl::Status PsShard::ValidateWorker(int worker, const char* what) const {
  if (worker < 0 || worker >= options_.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": worker ", worker, " out of range [0, ", options_.num_workers, ")"));
  }
  return absl::OkStatus();
}

absl::Status PsShard::Init(const InitRequest& request, IncomingFrame& payload, InitResponse* response) {
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(request.worker(), "init"));
  PSTRAIN_RETURN_IF_ERROR(InstallVariables(request, payload, response));
  WakePulls();
  return absl::OkStatus();
}

absl::Status PsShard::InstallVariables(const InitRequest& request, IncomingFrame& payload,
                                       InitResponse* response) {
  absl::MutexLock lock(&mu_);
  if (initialized_.load()) {
    response->set_already_initialized(true);
    return absl::OkStatus();
  }
  uint64_t declared = 0;
  std::set<std::string> names;
  for (const TensorHeader& h : request.tensors()) {
    Shape shape(h.shape().begin(), h.shape().end());
    for (int64_t d : shape) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("init ", h.name(), ": negative dimension"));
    }
    PSTRAIN_RETURN_IF_ERROR(CheckTensorHeader(h, shape, NumElements(shape), "init"));
    if (!names.insert(h.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("init: variable ", h.name(), " given twice"));
    }
    declared += h.num_bytes();
  }
  PSTRAIN_RETURN_IF_ERROR(CheckPayloadSize(payload, declared, "init"));
  for (const TensorHeader& h : request.tensors()) {
    auto var = std::make_unique<Variable>();
    var->name = h.name();
    var->shape.assign(h.shape().begin(), h.shape().end());
    var->n = NumElements(var->shape);
    absl::MutexLock var_lock(&var->mu);
    var->value = Buffer::Allocate(var->bytes());
    PSTRAIN_RETURN_IF_ERROR(payload.Read(var->value->data(), var->bytes()));
    var->slots.assign(optimizer_->num_slots(), std::vector<float>(var->n, 0.0f));
    var->contributed.assign(options_.num_workers, false);
    variables_[var->name] = std::move(var);
  }
  total_steps_ = request.total_steps();
  bytes_in_ += declared;
  initialized_ = true;
  LOG(INFO) << "shard " << options_.shard_index << ": initialised " << variables_.size() << " variables ("
            << declared << " bytes) from worker " << request.worker();
  response->set_already_initialized(false);
  return absl::OkStatus();
}

absl::StatusOr<bool> PsShard::TryServePull(const PullRequest& request, OutgoingFrame* response) {
  if (!initialized_.load()) return false;
  std::vector<Variable*> vars;
  if (request.names().empty()) {
    for (auto& [name, var] : variables_) vars.push_back(var.get());
  } else {
    for (const std::string& name : request.names()) {
      auto it = variables_.find(name);
      if (it == variables_.end()) {
        return absl::InvalidArgumentError(absl::StrCat("pull: unknown variable '", name, "' on shard ",
                                                       options_.shard_index));
      }
      vars.push_back(it->second.get());
    }
  }
  for (Variable* var : vars) {
    if (var->version.load() < request.min_version()) return false;
  }
  if (options_.consistency == "ssp" && !SspLaggards(request).empty()) return false;
  PullResponse header;
  for (Variable* var : vars) {
    absl::MutexLock lock(&var->mu);
    TensorHeader* h = header.add_tensors();
    h->set_name(var->name);
    for (int64_t d : var->shape) h->add_shape(d);
    h->set_dtype(DT_FLOAT32);
    h->set_num_bytes(var->bytes());
    header.add_versions(var->version.load());
    response->chunks.push_back({var->value->data(), var->bytes(), var->value});
  }
  header.SerializeToString(&response->header);
  bytes_out_ += response->payload_bytes();
  return true;
}

void PsShard::Pull(const PullRequest& request, Responder respond) {
  if (absl::Status s = ValidateWorker(request.worker(), "pull"); !s.ok()) {
    respond(s, {});
    return;
  }
  OutgoingFrame response;
  absl::StatusOr<bool> ready;
  {
    // Check-and-park under mu_, so an update that lands in between wakes us.
    absl::MutexLock lock(&mu_);
    ready = TryServePull(request, &response);
    if (ready.ok() && !*ready) {
      absl::Duration timeout = request.timeout_ms() > 0 ? absl::Milliseconds(request.timeout_ms())
                                                         : absl::Seconds(options_.timeouts.rpc_seconds());
      const absl::Time now = absl::Now();
      pending_.push_back({request, std::move(respond), now + timeout, now});
      return;
    }
  }
  if (!ready.ok()) {
    respond(ready.status(), {});
  } else {
    respond(absl::OkStatus(), std::move(response));
  }
}

void PsShard::WakePulls() {
  std::vector<std::pair<Responder, absl::StatusOr<OutgoingFrame>>> answers;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      OutgoingFrame response;
      absl::StatusOr<bool> ready = TryServePull(it->request, &response);
      if (ready.ok() && !*ready) {
        ++it;
        continue;
      }
      if (ready.ok()) {
        if (options_.consistency == "ssp" && initialized_.load()) {
          ++ssp_blocked_pulls_;
          ssp_wait_ += absl::Now() - it->parked_at;
        }
        answers.emplace_back(std::move(it->respond), std::move(response));
      } else {
        answers.emplace_back(std::move(it->respond), ready.status());
      }
      it = pending_.erase(it);
    }
  }
  for (auto& [respond, answer] : answers) {
    if (answer.ok()) {
      respond(absl::OkStatus(), *std::move(answer));
    } else {
      respond(answer.status(), {});
    }
  }
}

float PsShard::CurrentLearningRate(const Variable& var) const {
  // Schedules run over global steps. A sync update is one global step; an
  // async/ssp update is one worker's step, so num_workers of them make one.
  int64_t global_step = var.version.load();
  if (options_.consistency != "sync") global_step /= options_.num_workers;
  return LearningRateAt(options_.optimizer, global_step, total_steps_);
}

void PsShard::ApplyUpdate(Variable& var, float* grad, float scale) const {
  // Called with var.mu held. Writes a fresh buffer; pulls in flight keep
  // sending the old one, which becomes the spare once they release it.
  if (scale != 1.0f) {
    for (int64_t i = 0; i < var.n; ++i) grad[i] *= scale;
  }
  std::shared_ptr<Buffer> out = (var.spare != nullptr && var.spare.use_count() == 1) ? std::move(var.spare)
                                                                                     : Buffer::Allocate(var.bytes());
  std::vector<float*> slots;
  for (auto& slot : var.slots) slots.push_back(slot.data());
  optimizer_->Apply(static_cast<const float*>(var.value->data()), grad, var.n,
                    CurrentLearningRate(var), slots.data(),
                    static_cast<float*>(out->data()));
  var.spare = std::move(var.value);
  var.value = std::move(out);
  var.version.fetch_add(1);
}

absl::Status PsShard::Push(const PushRequest& request, IncomingFrame& payload, PushResponse* response) {
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(request.worker(), "push"));
  if (!initialized_.load()) return absl::FailedPreconditionError("push before the chief initialised the variables");
  const int worker = request.worker();
  const int64_t step = request.step();
  const bool sync = options_.consistency == "sync";

  // Validation: nothing changes unless the whole request is well formed.
  // First what needs no lock...
  uint64_t declared = 0;
  std::vector<Variable*> vars;
  std::set<std::string> names;
  for (const TensorHeader& h : request.tensors()) {
    auto it = variables_.find(h.name());
    if (it == variables_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("push: unknown variable '", h.name(), "' on shard ", options_.shard_index));
    }
    Variable& var = *it->second;
    PSTRAIN_RETURN_IF_ERROR(CheckTensorHeader(h, var.shape, var.n, "push"));
    if (!names.insert(h.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("push: variable ", h.name(), " given twice"));
    }
    declared += h.num_bytes();
    vars.push_back(&var);
  }
  PSTRAIN_RETURN_IF_ERROR(CheckPayloadSize(payload, declared, "push"));
  // ...then the variables' state, with every lock of this push held until
  // the update is done, so two pushes cannot both pass the checks and then
  // both apply. Locks are taken in name order, so pushes cannot deadlock.
  VariableLocks locks(vars);
  for (Variable* var : vars) {
    if (step < 0 || step > var->version.load()) {
      return absl::InvalidArgumentError(absl::StrCat("push: step ", step, " of ", var->name,
                                                     " is ahead of the variable (version ", var->version.load(), ")"));
    }
    if (sync && step == var->version.load() && var->contributed[worker]) {
      return absl::InvalidArgumentError(
          absl::StrCat("push: worker ", worker, " already pushed ", var->name, " for step ", step));
    }
  }
  bytes_in_ += declared;

  bool applied_any = false;
  int accepted = 0, dropped = 0;
  for (Variable* var_ptr : vars) {
    Variable& var = *var_ptr;  // locked by `locks`
    absl::Time t0 = absl::Now();
    if (!sync) {  // async and ssp
      // Elementwise optimizer over the payload's runs, straight from the wire.
      std::shared_ptr<Buffer> out = (var.spare != nullptr && var.spare.use_count() == 1)
                                        ? std::move(var.spare)
                                        : Buffer::Allocate(var.bytes());
      const float lr = CurrentLearningRate(var);
      const float* old_value = static_cast<const float*>(var.value->data());
      float* new_value = static_cast<float*>(out->data());
      std::vector<float*> slots(var.slots.size());
      PSTRAIN_RETURN_IF_ERROR(payload.ConsumeFloats(var.bytes(), [&](size_t first, const float* g, size_t count) {
        for (size_t s = 0; s < slots.size(); ++s) slots[s] = var.slots[s].data() + first;
        optimizer_->Apply(old_value + first, g, static_cast<int64_t>(count), lr, slots.data(), new_value + first);
      }));
      var.spare = std::move(var.value);
      var.value = std::move(out);
      var.version.fetch_add(1);
      applied_updates_++;
      applied_any = true;
      ++accepted;
    } else if (step < var.version.load()) {
      PSTRAIN_RETURN_IF_ERROR(payload.Consume(var.bytes(), [](const char*, size_t) {}));
      ++dropped;
      dropped_gradients_++;
      LOG(INFO) << "shard " << options_.shard_index << ": dropped gradient of " << var.name << " from worker "
                << worker << " for step " << step << " (already applied, version " << var.version.load() << ")";
    } else {
      if (var.contributors == 0) {
        var.accum.resize(var.n);
        var.first_arrival = absl::Now();
        PSTRAIN_RETURN_IF_ERROR(payload.Read(var.accum.data(), var.bytes()));
      } else {
        float* acc = var.accum.data();
        PSTRAIN_RETURN_IF_ERROR(payload.ConsumeFloats(var.bytes(), [acc](size_t first, const float* g, size_t count) {
          float* a = acc + first;
          for (size_t i = 0; i < count; ++i) a[i] += g[i];
        }));
      }
      var.contributed[worker] = true;
      ++var.contributors;
      ++accepted;
      if (var.contributors >= ReplicasNeeded(var)) {
        ApplyUpdate(var, var.accum.data(), 1.0f / static_cast<float>(var.contributors));
        var.contributed.assign(options_.num_workers, false);
        var.contributors = 0;
        applied_updates_++;
        applied_any = true;
      }
    }
    apply_nanos_ += absl::ToInt64Nanoseconds(absl::Now() - t0);
  }
  response->set_accepted(accepted);
  response->set_dropped_stale(dropped);
  locks.Release();
  {
    absl::MutexLock lock(&mu_);
    last_seen_[worker] = absl::Now();
    seen_[worker] = true;
    last_step_[worker] = std::max(last_step_[worker], step);
    completed_steps_[worker] = std::max(completed_steps_[worker], request.local_step() + 1);
  }
  if (applied_any) WakePulls();
  return absl::OkStatus();
}

absl::Status PsShard::Heartbeat(const HeartbeatRequest& request) {
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(request.worker(), "heartbeat"));
  {
    absl::MutexLock lock(&mu_);
    last_seen_[request.worker()] = absl::Now();
    seen_[request.worker()] = true;
    last_step_[request.worker()] = std::max(last_step_[request.worker()], request.step());
  }
  if (request.finished_pushing() && !departed_[request.worker()].exchange(true)) {
    ApplyCompleteSyncSteps();
    WakePulls();
  }
  return absl::OkStatus();
}

absl::Status PsShard::Done(const DoneRequest& request) {
  const int worker = request.report().worker();
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(worker, "done"));
  {
    absl::MutexLock lock(&mu_);
    if (done_[worker]) return absl::OkStatus();
    done_[worker] = true;
    departed_[worker] = true;
    reports_.push_back(request.report());
    LOG(INFO) << "shard " << options_.shard_index << ": worker " << worker << " done after "
              << request.report().steps() << " steps";
  }
  ApplyCompleteSyncSteps();
  WakePulls();  // ssp pulls no longer wait for this worker
  return absl::OkStatus();
}

int PsShard::ReplicasNeeded(const Variable& var) const {
  int possible = 0;
  for (int w = 0; w < options_.num_workers; ++w) {
    if (!departed_[w].load() || var.contributed[w]) ++possible;
  }
  return std::max(1, std::min(replicas_, possible));
}

void PsShard::ApplyCompleteSyncSteps() {
  if (options_.consistency != "sync" || !initialized_.load()) return;
  for (auto& [name, var] : variables_) {
    absl::MutexLock lock(&var->mu);
    if (var->contributors > 0 && var->contributors >= ReplicasNeeded(*var)) {
      ApplyUpdate(*var, var->accum.data(), 1.0f / static_cast<float>(var->contributors));
      var->contributed.assign(options_.num_workers, false);
      var->contributors = 0;
      applied_updates_++;
    }
  }
}

std::vector<int> PsShard::SspLaggards(const PullRequest& request) const {
  std::vector<int> laggards;
  const int64_t needed = request.local_step() - options_.staleness;
  for (int w = 0; w < options_.num_workers; ++w) {
    if (w == request.worker() || done_[w] || lost_[w]) continue;
    if (completed_steps_[w] < needed) laggards.push_back(w);
  }
  return laggards;
}

StatsResponse PsShard::Stats() const {
  StatsResponse stats;
  ShardLoad* load = stats.mutable_load();
  {
    absl::MutexLock lock(&mu_);
    load->set_ssp_blocked_pulls(ssp_blocked_pulls_);
    load->set_ssp_wait_seconds(absl::ToDoubleSeconds(ssp_wait_));
    for (const WorkerReport& r : reports_) *stats.add_done() = r;
    for (int w = 0; w < options_.num_workers; ++w) {
      if (lost_[w]) stats.add_lost(w);
    }
  }
  load->set_shard(options_.shard_index);
  if (initialized_.load()) {
    int64_t bytes = 0;
    for (const auto& [name, var] : variables_) bytes += var->bytes();
    load->set_variables(variables_.size());
    load->set_variable_bytes(bytes);
  }
  load->set_bytes_in(bytes_in_.load());
  load->set_bytes_out(bytes_out_.load());
  load->set_apply_seconds(apply_nanos_.load() * 1e-9);
  load->set_applied_updates(applied_updates_.load());
  load->set_dropped_gradients(dropped_gradients_.load());
  return stats;
}

std::vector<int> PsShard::MissingContributors(const Variable& var) const {
  std::vector<int> missing;
  for (int w = 0; w < options_.num_workers; ++w) {
    if (!var.contributed[w]) missing.push_back(w);
  }
  return missing;
}

std::string PsShard::DescribeWait(const PullRequest& request) const {
  if (!initialized_.load()) return "variables not initialised yet (waiting for Init from the chief, worker 0)";
  if (options_.consistency == "ssp") {
    return absl::StrCat("ssp: worker ", request.worker(), " at step ", request.local_step(),
                        " waits for workers [", absl::StrJoin(SspLaggards(request), ","),
                        "] to complete step ", request.local_step() - options_.staleness, " (staleness ",
                        options_.staleness, ")");
  }
  for (const auto& [name, var] : variables_) {
    if (!request.names().empty() &&
        std::find(request.names().begin(), request.names().end(), name) == request.names().end()) {
      continue;
    }
    if (var->version.load() >= request.min_version()) continue;
    absl::MutexLock lock(&var->mu);
    std::string why = absl::StrCat(name, " is at version ", var->version.load());
    if (options_.consistency == "sync") {
      absl::StrAppend(&why, "; sync step ", var->version.load(), " is waiting for gradients from workers [",
                      absl::StrJoin(MissingContributors(*var), ","), "]");
    }
    return why;
  }
  return "nothing (ready)";
}

absl::Status PsShard::Check(absl::Time now) {
  // 1. Expire pulls.
  std::vector<std::pair<Responder, absl::Status>> expired;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      expired.emplace_back(std::move(it->respond),
                           absl::DeadlineExceededError(absl::StrCat(
                               "shard ", options_.shard_index, ": pull by worker ", it->request.worker(),
                               " for version >= ", it->request.min_version(), " timed out: ", DescribeWait(it->request))));
      it = pending_.erase(it);
    }
  }
  for (auto& [respond, status] : expired) {
    LOG(WARNING) << status.message();
    respond(status, {});
  }
  const bool sync = options_.consistency == "sync";

  // 2. Sync steps waiting too long.
  if (sync && initialized_.load()) {
    const absl::Duration limit = absl::Seconds(options_.timeouts.sync_step_seconds());
    for (const auto& [name, var] : variables_) {
      absl::MutexLock lock(&var->mu);
      if (var->contributors > 0 && now - var->first_arrival > limit) {
        return absl::DeadlineExceededError(absl::StrCat(
            "sync step ", var->version.load(), ": waiting for gradients of ", name, " from workers [",
            absl::StrJoin(MissingContributors(*var), ","), "] for more than ", absl::FormatDuration(limit)));
      }
    }
  }

  // 3. Lost workers.
  absl::MutexLock lock(&mu_);
  for (int w = 0; w < options_.num_workers; ++w) {
    if (done_[w] || lost_[w]) continue;
    const absl::Duration limit = seen_[w] ? absl::Seconds(options_.timeouts.worker_lost_seconds())
                                          : absl::Seconds(options_.timeouts.startup_seconds());
    const absl::Duration silent = now - last_seen_[w];
    if (silent <= limit) continue;
    std::string what =
        seen_[w] ? absl::StrCat("worker ", w, " lost: no heartbeat for ", absl::FormatDuration(silent),
                                " (last step ", last_step_[w], ")")
                 : absl::StrCat("worker ", w, " never connected within startup_seconds (",
                                absl::FormatDuration(limit), ")");
    if (sync) return absl::UnavailableError(what);
    lost_[w] = true;
    departed_[w] = true;
    LOG(WARNING) << "shard " << options_.shard_index << ": " << what << "; " << options_.consistency
                 << " training continues without it";
  }
  return absl::OkStatus();
}

bool PsShard::Finished() const {
  absl::MutexLock lock(&mu_);
  for (int w = 0; w < options_.num_workers; ++w) {
    if (!done_[w] && !lost_[w]) return false;
  }
  return true;
}

std::vector<int> PsShard::LostWorkers() const {
  absl::MutexLock lock(&mu_);
  std::vector<int> lost;
  for (int w = 0; w < options_.num_workers; ++w) {
    if (lost_[w]) lost.push_back(w);
  }
  return lost;
}

}  // namespace pstrain
