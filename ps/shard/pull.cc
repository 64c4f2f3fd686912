// PsShard's pulls: answered at once when every requested variable has
// reached the version asked for and the policy lets the pull proceed,
// otherwise parked (ps/shard/parked_pulls.h) until an update, a departure
// or an Init lets WakePulls answer it, or its deadline passes.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/compression/compression.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "ps/shard/shard.h"

namespace pstrain {
namespace {

// The variables a pull names, in its order (none named: every variable, by
// name); INVALID_ARGUMENT for a name this shard does not hold.
absl::StatusOr<std::vector<ShardVariable*>> PullVariables(const PullRequest& request, const VariableStore& store,
                                                          int shard_index) {
  std::vector<ShardVariable*> vars;
  if (request.names().empty()) {
    for (auto& [name, var] : store.variables()) vars.push_back(var.get());
    return vars;
  }
  for (const std::string& name : request.names()) {
    ShardVariable* var = store.Find(name);
    if (var == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("pull: unknown variable '", name, "' on shard ", shard_index));
    }
    vars.push_back(var);
  }
  return vars;
}

// `var`'s current value in `dtype` (16-bit), encoded once per version.
std::shared_ptr<Buffer> EncodedValue(ShardVariable& var, WireDType dtype) ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu) {
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

}  // namespace

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
    members_.Note(request.worker(), request.incarnation(), store_.NewestVersion());
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

absl::StatusOr<PullState> PsShard::TryServePull(const PullRequest& request, OutgoingFrame* response) {
  PSTRAIN_RETURN_IF_ERROR(store_.CheckGeneration(request.generation()));
  if (!store_.initialized() || store_.generation() < std::max<int64_t>(1, request.min_generation())) {
    return PullState::kWaitingForVersions;
  }
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<ShardVariable*> vars,
                           PullVariables(request, store_, options_.shard_index));
  for (ShardVariable* var : vars) {
    if (var->version.load() < request.min_version()) return PullState::kWaitingForVersions;
  }
  const WireDType dtype = request.value_dtype();
  if (WireDTypeSize(dtype) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("pull: unknown value_dtype ", dtype));
  }
  if (!policy_->PullBlockers(request, members_.roster().progress()).empty()) return PullState::kBlockedByPolicy;
  WritePullResponse(request, vars, dtype, response);
  return PullState::kReady;
}

void PsShard::WritePullResponse(const PullRequest& request, const std::vector<ShardVariable*>& vars, WireDType dtype,
                                OutgoingFrame* response) {
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
  for (const Straggler& s : members_.stragglers().Current()) *header.add_stragglers() = s;
  header.set_generation(store_.generation());
  if (request.min_generation() > 0) {  // a worker joining: where it stands
    header.set_rejoined(members_.roster().rejoined(request.worker()));
    header.set_worker_steps(members_.roster().progress().completed_steps[request.worker()]);
  }
  header.SerializeToString(&response->header);
  bytes_out_ += response->payload_bytes();
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

void PsShard::ExpirePulls(absl::Time now) {
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
}

void PsShard::CancelPendingPulls(const absl::Status& status) {
  std::vector<PullAnswer> answers;
  {
    absl::MutexLock lock(&mu_);
    answers = parked_.TakeAll(status);
  }
  SendAll(std::move(answers));
  if (absl::StatusOr<SparseTables*> tables = Tables("cancel"); tables.ok()) (*tables)->CancelPulls(status);
}

std::string PsShard::DescribeWait(const PullRequest& request) const {
  if (!store_.initialized()) return "variables not initialised yet (waiting for Init from the chief, worker 0)";
  if (store_.generation() < request.min_generation()) {
    return absl::StrCat("the chief's restore of this shard (generation ", request.min_generation(), "; now ",
                        store_.generation(), ")");
  }
  if (std::vector<int> blockers = policy_->PullBlockers(request, members_.roster().progress()); !blockers.empty()) {
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

}  // namespace pstrain
