// ElasticAllReduceStrategy: the all-reduce strategy (allreduce.cc) in a
// group that re-forms. Per step as there: a FusedAllReducer sums the
// gradients bucket by bucket during backward, every replica applies the
// same update. Then, at the step's boundary, every member commits the step
// to the group's ledger and the group changes if it must: joiners admitted
// (state from the chief), or the last step's data too small for everyone
// (the members without a batch leave). A failed operation is recovered in
// Recover: the survivors re-form and take the state of the one that
// committed the most steps.
#include "worker/strategies/elastic_allreduce.h"

#include <cstring>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/compression/compression.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "worker/collective/cluster_store.h"
#include "worker/elastic/elastic_group.h"
#include "worker/elastic/group_ledger.h"
#include "worker/fused_allreduce.h"
#include "worker/local_optimizer.h"

namespace pstrain {
namespace {

class ElasticAllReduceStrategy : public Strategy, public GroupSession {
 public:
  static absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context) {
    if (context.ledger == nullptr) {
      return absl::FailedPreconditionError("elastic all-reduce: no data ledger (data.sharding dynamic)");
    }
    std::unique_ptr<ElasticAllReduceStrategy> s(new ElasticAllReduceStrategy(context));
    const ExperimentConfig& c = *context.config;
    PSTRAIN_ASSIGN_OR_RETURN(s->cluster_store_,
                             ClusterStore::Open(c, context.worker_index, context.transport, context.listen_address));
    PSTRAIN_ASSIGN_OR_RETURN(const HostPort me, ParseHostPort(c.cluster().worker_hosts(context.worker_index)));
    ElasticGroup::Options options;
    options.store = s->cluster_store_->store();
    options.prefix = absl::StrCat("elastic/", c.name());
    options.worker = context.worker_index;
    options.listed_workers = context.num_workers;
    options.start_workers = c.elastic().min_workers();
    options.min_workers = std::max(1, c.elastic().min_workers());
    options.host = me.host == "localhost" ? "127.0.0.1" : me.host;
    options.op_timeout = absl::Seconds(c.timeouts().sync_step_seconds());
    options.startup = absl::Seconds(c.timeouts().startup_seconds());
    options.regroup_window = absl::Seconds(c.elastic().regroup_seconds());
    s->group_ = std::make_unique<ElasticGroup>(options);
    s->worker_batch_ = int64_t{c.train().batch_size_per_device()} * context.replicas->size();
    PSTRAIN_ASSIGN_OR_RETURN(GroupLedger ledger,
                             GroupLedger::Create(*context.ledger, s->worker_batch_, context.num_workers));
    s->ledger_ = std::make_unique<GroupLedger>(std::move(ledger));
    PSTRAIN_ASSIGN_OR_RETURN(s->optimizers_, LocalOptimizer::ForReplicas(c, *context.replicas, context.total_steps));
    for (int r = 0; r < context.replicas->size(); ++r) {
      s->gradients_.emplace_back();
      for (const Variable& v : context.replicas->variables(r)) s->gradients_.back().push_back(v.grad);
    }
    PSTRAIN_ASSIGN_OR_RETURN(const Compression compression, ParseCompression(c.compression()));
    s->wire_dtype_ = DenseWireDType(compression);
    return std::unique_ptr<Strategy>(std::move(s));
  }

  ~ElasticAllReduceStrategy() override { reducer_.reset(); }  // its thread may be inside the collective

  absl::StatusOr<int64_t> Start() override {
    PSTRAIN_RETURN_IF_ERROR(group_->Join());
    PSTRAIN_RETURN_IF_ERROR(TakeGroupState());
    if (next_step_ > 0) {
      std::cout << "worker " << context_.worker_index << ": joining the run at step " << next_step_ << " (generation "
                << group_->generation().number << ", " << group_->size() << " workers)" << std::endl;
    }
    return next_step_;
  }

  absl::Status BeforeStep(int64_t step) override {
    reducer_->BeginStep();
    return absl::OkStatus();
  }

  GradientReadyHook HookFor(int replica) override {
    return [this](int variable) { reducer_->GradientReady(variable); };
  }

  absl::Status AfterStep(int64_t step) override {
    PSTRAIN_RETURN_IF_ERROR(reducer_->FinishStep(&wait_));
    // The schedule follows the data, not the steps (their number depends on
    // the group's sizes): the step a group of every listed worker would be at.
    const int64_t schedule_step = ledger_->next() / (worker_batch_ * context_.num_workers);
    const float scale = reducer_->gradient_scale();
    const float lr_scale = context_.config->elastic().scale_learning_rate()
                               ? static_cast<float>(group_->size()) / static_cast<float>(context_.num_workers)
                               : 1.0f;
    context_.replicas->ForEach(
        [&](int r) { optimizers_[r]->Apply(context_.replicas->variables(r), schedule_step, scale, lr_scale); });
    ledger_->Commit(group_->generation().members);
    committed_ = step;
    next_step_ = step + 1;
    return AtStepBoundary(step);
  }

  absl::StatusOr<int64_t> Recover(const absl::Status& failure) override;

  absl::StatusOr<ChunkResponse> ExchangeChunks(const std::vector<CompletedChunk>&) override {
    ChunkResponse response;
    std::optional<DataChunk> slice;
    if (!group_->left()) slice = ledger_->Slice(group_->rank(), group_->size());
    if (slice) {
      *response.mutable_chunk() = *slice;
    } else {
      response.set_end(true);
    }
    return response;
  }

  absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) override;

  std::string Describe() const override {
    const ExperimentConfig& c = *context_.config;
    return absl::StrCat("allreduce (gloo, elastic: ", group_->size(), " of ", context_.num_workers,
                        " listed workers, generation ", group_->generation().number,
                        ", fusion buckets of <= ", c.fusion_threshold_bytes(), " bytes",
                        c.compression() == "none" ? "" : ", as " + c.compression(), ")");
  }
  StrategyTraffic traffic() const override {
    StrategyTraffic traffic;
    traffic.bytes_allreduced = bytes_before_ + (reducer_ ? reducer_->bytes_allreduced() : 0);
    traffic.wait = wait_;
    traffic.group_generation = group_->generation().number;
    traffic.group_members = group_->size();
    return traffic;
  }
  GroupSession* group() override { return this; }

 private:
  explicit ElasticAllReduceStrategy(const StrategyContext& context) : context_(context) {}

  // After the step's commit: the group shrinks for the run's last step, or
  // admits the workers waiting to join (every elastic.join_every_steps
  // steps: the step numbers agree on every member).
  absl::Status AtStepBoundary(int64_t step) {
    if (ledger_->done()) return absl::OkStatus();
    const int keep = ledger_->MembersWithData(group_->size());
    if (keep < group_->size()) {
      PSTRAIN_RETURN_IF_ERROR(group_->Shrink(keep, step));
      return group_->left() ? absl::OkStatus() : NewReducer();
    }
    if ((step + 1) % context_.config->elastic().join_every_steps() != 0) return absl::OkStatus();
    PSTRAIN_ASSIGN_OR_RETURN(const bool changed, group_->AdmitJoiners(step));
    return changed ? TakeGroupState() : absl::OkStatus();
  }

  absl::Status NewReducer() {
    if (reducer_) bytes_before_ += reducer_->bytes_allreduced();
    reducer_.reset();
    PSTRAIN_ASSIGN_OR_RETURN(
        reducer_, FusedAllReducer::Create(group_->collective(), gradients_, context_.config->fusion_threshold_bytes(),
                                          group_->size(), wire_dtype_));
    reducer_->set_timeline(context_.timeline);
    return absl::OkStatus();
  }

  // A new generation: everyone takes the root's step, data position,
  // variables and optimizer slots.
  absl::Status TakeGroupState();

  StrategyContext context_;
  std::unique_ptr<ClusterStore> cluster_store_;
  std::unique_ptr<ElasticGroup> group_;
  std::unique_ptr<GroupLedger> ledger_;
  std::unique_ptr<FusedAllReducer> reducer_;
  std::vector<std::vector<Tensor>> gradients_;  // [replica][variable]
  std::vector<std::unique_ptr<LocalOptimizer>> optimizers_;
  WireDType wire_dtype_ = DT_FLOAT32;
  int64_t worker_batch_ = 0;  // examples per step of one worker
  int64_t committed_ = -1;    // the last step this worker committed
  int64_t next_step_ = 0;
  int64_t bytes_before_ = 0;  // all-reduced by earlier generations' reducers
  absl::Duration wait_;
};

absl::Status ElasticAllReduceStrategy::TakeGroupState() {
  PSTRAIN_RETURN_IF_ERROR(NewReducer());
  Collective* collective = group_->collective();
  const int root = group_->generation().RankOf(group_->generation().root);
  // int64s travel as pairs of float32 bit patterns (a broadcast copies bytes).
  std::vector<int64_t> header = {next_step_, committed_};
  const std::vector<int64_t> ledger = ledger_->Encode();
  header.insert(header.end(), ledger.begin(), ledger.end());
  PSTRAIN_RETURN_IF_ERROR(collective->BroadcastTyped(header.data(), header.size() * 2, DT_FLOAT32, root));
  next_step_ = header[0];
  committed_ = header[1];
  PSTRAIN_RETURN_IF_ERROR(ledger_->Decode(std::vector<int64_t>(header.begin() + 2, header.end())));
  for (Variable& v : context_.replicas->variables(0)) {
    PSTRAIN_RETURN_IF_ERROR(collective->Broadcast(v.value.data(), v.value.num_elements(), root));
  }
  for (std::vector<float>* slot : optimizers_[0]->mutable_slots()) {
    PSTRAIN_RETURN_IF_ERROR(collective->Broadcast(slot->data(), slot->size(), root));
  }
  context_.replicas->BroadcastValues(0);
  for (size_t r = 1; r < optimizers_.size(); ++r) optimizers_[r]->CopySlotsFrom(*optimizers_[0]);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ElasticAllReduceStrategy::Recover(const absl::Status& failure) {
  if (context_.config->elastic().on_worker_lost() == ElasticConfig::stop) return failure;
  const int w = context_.worker_index;
  std::cout << "worker " << w << ": the group's generation " << group_->generation().number << " broke after step "
            << committed_ << " (" << failure.message() << "); re-forming" << std::endl;
  if (reducer_) bytes_before_ += reducer_->bytes_allreduced();
  reducer_.reset();
  const absl::Time deadline = absl::Now() + absl::Seconds(context_.config->timeouts().startup_seconds());
  absl::Status s = group_->Regroup(committed_);
  while (true) {
    if (s.ok()) s = TakeGroupState();
    if (s.ok()) break;
    if (absl::IsFailedPrecondition(s) || absl::Now() > deadline) {
      return absl::Status(s.code(), absl::StrCat("worker ", w, ": the group did not re-form: ", s.message(),
                                                 " (after: ", failure.message(), ")"));
    }
    // Left out (too slow to answer): ask to join again; else the new
    // generation broke too: re-form again.
    s = absl::IsNotFound(s) ? group_->Join() : group_->Regroup(committed_);
  }
  std::cout << "worker " << w << ": continuing at step " << next_step_ << " in generation "
            << group_->generation().number << " (" << group_->size()
            << " workers: " << absl::StrJoin(group_->generation().members, ",") << ")" << std::endl;
  return next_step_;
}

absl::StatusOr<ClusterReport> ElasticAllReduceStrategy::Finish(const WorkerReport& mine) {
  if (reducer_) bytes_before_ += reducer_->bytes_allreduced();
  reducer_.reset();
  // Nobody closes its connections while another member still reads from them.
  PSTRAIN_RETURN_IF_ERROR(group_->Barrier());
  PSTRAIN_RETURN_IF_ERROR(group_->PutReport(mine));
  ClusterReport report;
  report.workers.push_back(mine);
  if (context_.worker_index != 0) return report;
  std::vector<int> others;
  for (int w : group_->finishers()) {
    if (w != context_.worker_index) others.push_back(w);
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<WorkerReport> theirs, group_->GatherReports(others));
  for (WorkerReport& r : theirs) report.workers.push_back(std::move(r));
  report.membership = group_->changes();
  std::map<int, bool> lost;
  for (const MembershipChange& c : report.membership) lost[c.worker()] = c.change() == "lost";
  for (const auto& [worker, is_lost] : lost) {
    if (is_lost) report.lost_workers.push_back(worker);
  }
  report.ledger = ledger_->Report();
  return report;
}

}  // namespace

bool IsElasticAllReduce(const ExperimentConfig& config) {
  return config.variable_update() == "allreduce" && config.data().sharding() == DataConfig::dynamic;
}

absl::StatusOr<std::unique_ptr<Strategy>> CreateElasticAllReduce(const StrategyContext& context) {
  return ElasticAllReduceStrategy::Create(context);
}

}  // namespace pstrain
