// PsShard's pushes: a push is validated completely, with every lock it
// needs held, before any variable changes; then each gradient goes to the
// consistency policy, in the request's order (the payload's).
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "ps/shard/push_decoder.h"
#include "ps/shard/request_checks.h"
#include "ps/shard/shard.h"

namespace pstrain {
namespace {

// The variables a push names, in its order, and the payload bytes its
// tensors declare.
struct PushTargets {
  std::vector<ShardVariable*> vars;
  uint64_t declared = 0;
};

// Push's checks that need no lock: every tensor names a variable of this
// shard, once, with its shape and a byte count to match, and the payload
// holds what they declare.
absl::StatusOr<PushTargets> FindPushTargets(const PushRequest& request, const IncomingFrame& payload,
                                            const VariableStore& store, int shard_index) {
  PushTargets targets;
  std::set<std::string> names;
  for (const TensorHeader& h : request.tensors()) {
    ShardVariable* var = store.Find(h.name());
    if (var == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("push: unknown variable '", h.name(), "' on shard ", shard_index));
    }
    PSTRAIN_RETURN_IF_ERROR(CheckTensorHeader(h, var->shape, var->n, "push", /*encoded=*/true));
    if (!names.insert(h.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("push: variable ", h.name(), " given twice"));
    }
    targets.declared += h.num_bytes();
    targets.vars.push_back(var);
  }
  PSTRAIN_RETURN_IF_ERROR(CheckPayloadSize(payload, targets.declared, "push"));
  return targets;
}

// A compressed push's tensors expanded to float32 (their encoding checked),
// one frame per variable; none for a push of plain float32.
absl::StatusOr<std::vector<IncomingFrame>> DecodeIfCompressed(const PushRequest& request,
                                                              const std::vector<ShardVariable*>& vars,
                                                              IncomingFrame& payload) {
  if (!PushIsEncoded(request)) return std::vector<IncomingFrame>();
  std::vector<int64_t> elements;
  for (const ShardVariable* var : vars) elements.push_back(var->n);
  return DecodePushTensors(request, elements, payload);
}

}  // namespace

absl::Status PsShard::Push(const PushRequest& request, IncomingFrame& payload, PushResponse* response) {
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(request.worker(), "push"));
  if (!store_.initialized()) {
    PSTRAIN_RETURN_IF_ERROR(store_.CheckGeneration(request.generation()));  // a restarted shard
    return absl::FailedPreconditionError("push before the chief initialised the variables");
  }
  const int64_t repeats_below = NotePusher(request);

  // Validation: nothing changes unless the whole request is well formed.
  // First what needs no lock...
  PSTRAIN_ASSIGN_OR_RETURN(const PushTargets targets, FindPushTargets(request, payload, store_, options_.shard_index));
  // Compressed tensors are expanded to float32 (and their encoding checked)
  // before any lock is taken or anything changes.
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<IncomingFrame> decoded, DecodeIfCompressed(request, targets.vars, payload));
  // ...then the variables' state, with every lock of this push held until
  // the update is done, so two pushes cannot both pass the checks and then
  // both apply.
  VariableLocks locks(targets.vars);
  // Under the locks: a restore changes every variable with all of them held.
  PSTRAIN_RETURN_IF_ERROR(store_.CheckGeneration(request.generation()));
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<bool> repeated,
                           CheckPushAgainstState(targets.vars, request.worker(), request.step(), repeats_below));
  bytes_in_ += targets.declared;

  PSTRAIN_ASSIGN_OR_RETURN(const bool applied_any,
                           ApplyGradients(request, targets.vars, repeated, decoded, payload, response));
  locks.Release();
  NotePushed(request);
  if (applied_any) WakePulls();
  return absl::OkStatus();
}

int64_t PsShard::NotePusher(const PushRequest& request) {
  absl::MutexLock lock(&mu_);
  members_.Note(request.worker(), request.incarnation(), store_.NewestVersion());
  members_.NotePace(request.worker(), request.local_step(), request.busy_seconds());
  return members_.roster().repeats_below(request.worker());
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

absl::StatusOr<bool> PsShard::ApplyGradients(const PushRequest& request, const std::vector<ShardVariable*>& vars,
                                             const std::vector<bool>& repeated, std::vector<IncomingFrame>& decoded,
                                             IncomingFrame& payload, PushResponse* response) {
  bool applied_any = false;
  int accepted = 0, dropped = 0;
  for (size_t t = 0; t < vars.size(); ++t) {  // in request order: the payload's order
    ShardVariable* var = vars[t];
    var->mu.AssertHeld();
    IncomingFrame& gradient = decoded.empty() ? payload : decoded[t];
    PSTRAIN_ASSIGN_OR_RETURN(const PushOutcome outcome, ApplyGradient(*var, request, repeated[t], gradient));
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
                  << request.worker() << " for step " << request.step()
                  << (repeated[t] ? " (repeated by its restarted process)"
                                  : absl::StrCat(" (already applied, version ", var->version.load(), ")"));
        break;
    }
  }
  response->set_accepted(accepted);
  response->set_dropped_stale(dropped);
  return applied_any;
}

absl::StatusOr<PushOutcome> PsShard::ApplyGradient(ShardVariable& var, const PushRequest& request, bool repeated,
                                                   IncomingFrame& gradient) {
  const absl::Time t0 = absl::Now();
  PushOutcome outcome = PushOutcome::kDropped;
  if (repeated) {
    PSTRAIN_RETURN_IF_ERROR(gradient.Consume(var.bytes(), [](const char*, size_t) {}));
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(outcome, policy_->Push(var, request.worker(), request.step(), gradient, store_.updater()));
  }
  apply_nanos_ += absl::ToInt64Nanoseconds(absl::Now() - t0);
  return outcome;
}

void PsShard::NotePushed(const PushRequest& request) {
  absl::MutexLock lock(&mu_);
  members_.roster().Pushed(request.worker(), absl::Now(), request.step(), request.local_step());
}

}  // namespace pstrain
