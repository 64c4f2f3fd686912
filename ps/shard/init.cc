// PsShard's Init: the first one publishes the variables, one of a newer
// generation restores them in place (ps/shard/variable_store.h), any other
// is acknowledged and ignored.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "common/transport/shared_values.h"
#include "glog/logging.h"
#include "ps/shard/request_checks.h"
#include "ps/shard/shard.h"
#include "ps/shard/shard_checkpoint.h"

namespace pstrain {
namespace {

// Init's checks of its tensors and payload, before anything is built.
absl::Status CheckInitTensors(const InitRequest& request, const IncomingFrame& payload) {
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
  return CheckPayloadSize(payload, declared, "init");
}

}  // namespace

absl::Status PsShard::Init(const InitRequest& request, IncomingFrame& payload, InitResponse* response) {
  PSTRAIN_RETURN_IF_ERROR(ValidateWorker(request.worker(), "init"));
  PSTRAIN_RETURN_IF_ERROR(InstallVariables(request, payload, response));
  WakePulls();
  return absl::OkStatus();
}

absl::Status PsShard::InstallVariables(const InitRequest& request, IncomingFrame& payload, InitResponse* response) {
  absl::MutexLock lock(&mu_);
  const int64_t generation = std::max<int64_t>(1, request.generation());
  // The data ledger comes with the state it belongs to (checked first, so a
  // bad one changes nothing).
  std::optional<DataLedger> ledger;
  if (request.has_ledger()) {
    absl::StatusOr<DataLedger> created = DataLedger::Create(request.ledger(), options_.num_workers);
    if (!created.ok()) return absl::InvalidArgumentError(absl::StrCat("init: ", created.status().message()));
    ledger = std::move(*created);
  }
  const bool installs = !store_.initialized() || generation > store_.generation();
  if (!store_.initialized()) {
    PSTRAIN_RETURN_IF_ERROR(PublishVariables(request, payload, generation));
    response->set_already_initialized(false);
  } else {
    if (installs) PSTRAIN_RETURN_IF_ERROR(RestoreInPlace(request, payload, generation));
    response->set_already_initialized(true);
  }
  if (installs && ledger) members_.SetLedger(*std::move(ledger));
  response->set_generation(store_.generation());
  return absl::OkStatus();
}

absl::StatusOr<VariableMap> PsShard::BuildVariables(const InitRequest& request, IncomingFrame& payload, int num_slots,
                                                    SparseTables* tables) const {
  PSTRAIN_RETURN_IF_ERROR(CheckInitTensors(request, payload));
  VariableMap variables;
  for (const TensorHeader& h : request.tensors()) {
    auto var = std::make_unique<ShardVariable>();
    var->name = h.name();
    var->shape.assign(h.shape().begin(), h.shape().end());
    var->n = NumElements(var->shape);
    absl::MutexLock var_lock(&var->mu);
    var->value = AllocateShareableValue(var->bytes());  // Read fills it (CheckInitTensors checked the sizes)
    PSTRAIN_RETURN_IF_ERROR(payload.Read(var->value->data(), var->bytes()));
    var->slots.assign(num_slots, std::vector<float>(var->n, 0.0f));
    var->consistency = policy_->NewState(*var);
    variables[var->name] = std::move(var);
  }
  if (request.has_restore()) {
    PSTRAIN_RETURN_IF_ERROR(
        LoadShardCheckpoint(request.restore(), options_.shard_index, options_.optimizer.name(), variables, tables));
  }
  return variables;
}

absl::Status PsShard::PublishVariables(const InitRequest& request, IncomingFrame& payload, int64_t generation) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, CreateOptimizer(options_.optimizer));
  PSTRAIN_ASSIGN_OR_RETURN(LearningRateSchedule schedule,
                           LearningRateSchedule::Create(options_.optimizer, request.total_steps()));
  // The tables first: a restore fills them too.
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<SparseTables> tables,
                           SparseTables::Create(SparseOptionsOf(options_, request.total_steps())));
  PSTRAIN_ASSIGN_OR_RETURN(VariableMap variables,
                           BuildVariables(request, payload, optimizer->num_slots(), tables.get()));
  sparse_ = std::move(tables);
  if (request.has_restore()) {
    const ShardRestore& restore = request.restore();
    ResumeAt(restore.step());
    LOG(INFO) << "shard " << options_.shard_index << ": restored " << variables.size() << " variables from "
              << restore.path() << " (step " << restore.step() << ")";
  }
  bytes_in_ += payload.payload_bytes();
  store_.Publish(std::move(variables), std::move(optimizer), std::move(schedule), generation);
  LOG(INFO) << "shard " << options_.shard_index << ": initialised " << store_.variables().size() << " variables ("
            << payload.payload_bytes() << " bytes) from worker " << request.worker() << ", generation " << generation;
  return absl::OkStatus();
}

absl::Status PsShard::RestoreInPlace(const InitRequest& request, IncomingFrame& payload, int64_t generation) {
  PSTRAIN_ASSIGN_OR_RETURN(VariableMap fresh,
                           BuildVariables(request, payload, store_.updater().num_slots(), sparse_.get()));
  PSTRAIN_RETURN_IF_ERROR(store_.Replace(std::move(fresh), generation, *policy_));
  const int64_t step = request.has_restore() ? request.restore().step() : 0;
  ResumeAt(step);
  members_.roster().ForgetRepeats();
  LOG(INFO) << "shard " << options_.shard_index << ": restored " << store_.variables().size()
            << " variables at generation " << generation << " from "
            << (request.has_restore() ? absl::StrCat(request.restore().path(), " (step ", step, ")")
                                      : std::string("the chief's initial values (step 0)"));
  return absl::OkStatus();
}

void PsShard::ResumeAt(int64_t step) {
  resumed_step_ = step;
  // Every worker resumes at that step.
  members_.roster().ResumeAt(step);
}

}  // namespace pstrain
