// allreduce: Horovod-style data parallelism without parameter servers.
//
// Every worker holds the whole model. The workers join one communicator of
// the configured collective (`collective`: gloo, a TCP ring that meets
// through the chief's key-value store on its worker port; mpi, the ranks of
// one mpirun; hierarchical_allreduce composes either per host,
// worker/collective/hierarchical.h). A FusedAllReducer (worker/
// fused_allreduce.h) sums the gradients of the worker's replicas and across
// workers bucket by bucket as backward produces them (tensor fusion,
// overlapped with backward), and every replica applies the same optimizer
// update to the mean (the 1/N taken inside the optimizer's pass). With
// `collective: nccl` (device gpu, the default there) the gradients stay on
// the GPUs and the NCCL strategy reduces them (nccl_allreduce.cc).
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compression/compression.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/collective/cluster_store.h"
#include "worker/collective/collective.h"
#include "worker/collective/hierarchical.h"
#include "worker/collective/start_values.h"
#include "worker/fused_allreduce.h"
#include "worker/local_optimizer.h"
#include "worker/report_table.h"
#include "worker/strategies/elastic_allreduce.h"
#include "worker/strategies/nccl_strategy.h"
#include "worker/strategy.h"

namespace pstrain {
namespace {

// The configured collective, or the device's default.
std::string CollectiveOf(const ExperimentConfig& c) {
  if (!c.collective().empty()) return c.collective();
  return c.device() == "gpu" ? "nccl" : "gloo";
}

class AllReduceStrategy : public Strategy {
 public:
  static absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context,
                                                          const CollectiveEntry& backend) {
    std::unique_ptr<AllReduceStrategy> s(new AllReduceStrategy(context));
    PSTRAIN_RETURN_IF_ERROR(s->Connect(backend));
    PSTRAIN_ASSIGN_OR_RETURN(s->optimizers_,
                             LocalOptimizer::ForReplicas(*context.config, *context.replicas, context.total_steps));
    std::vector<std::vector<Tensor>> gradients;
    for (int r = 0; r < context.replicas->size(); ++r) {
      gradients.emplace_back();
      for (const Variable& v : context.replicas->variables(r)) gradients.back().push_back(v.grad);
    }
    PSTRAIN_ASSIGN_OR_RETURN(const Compression compression, ParseCompression(context.config->compression()));
    PSTRAIN_ASSIGN_OR_RETURN(s->reducer_, FusedAllReducer::Create(s->collective_.get(), std::move(gradients),
                                                                  context.config->fusion_threshold_bytes(),
                                                                  context.num_workers, DenseWireDType(compression)));
    s->reducer_->set_timeline(context.timeline);
    return std::unique_ptr<Strategy>(std::move(s));
  }

  ~AllReduceStrategy() override {
    reducer_.reset();  // its thread may be inside the collective
    collective_.reset();
  }

  absl::StatusOr<int64_t> Start() override {
    // Everyone starts from the chief's replica 0: built here from the same
    // seed, the model's bytes cross the network only where a digest differs.
    if (context_.worker_index != 0) context_.replicas->InitializeVariables(context_.config->train().init_seed());
    std::vector<absl::Span<float>> values;
    for (Variable& v : context_.replicas->variables(0)) values.emplace_back(v.value.data(), v.value.num_elements());
    PSTRAIN_ASSIGN_OR_RETURN(const bool broadcast, AgreeOrBroadcast(*collective_, values));
    LOG(INFO) << "worker " << context_.worker_index << ": start values "
              << (broadcast ? "differed between workers; broadcast from the chief" : "agree with the chief's");
    context_.replicas->BroadcastValues(0);
    return 0;
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
    const float scale = reducer_->gradient_scale();  // the gradients hold the sum over every device
    context_.replicas->ForEach([&](int r) { optimizers_[r]->Apply(context_.replicas->variables(r), step, scale); });
    return absl::OkStatus();
  }

  absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) override {
    // Every worker's report, gathered by summing rows that each rank fills.
    std::vector<float> table = ReportTable(mine, context_.num_workers);
    PSTRAIN_RETURN_IF_ERROR(collective_->AllReduceSum(table.data(), table.size()));
    ClusterReport report = ReportsFromTable(mine, table, context_.num_workers);
    // Nobody leaves before everyone has the table (the chief's store and
    // sockets must outlive the others' last operation).
    PSTRAIN_RETURN_IF_ERROR(collective_->Barrier());
    return report;
  }

  std::string Describe() const override {
    const ExperimentConfig& c = *context_.config;
    const FusionPlan& plan = reducer_->plan();
    return absl::StrCat("allreduce (", CollectiveOf(c), c.hierarchical_allreduce() ? " hierarchical" : "", ", ",
                        context_.num_workers, " workers, ", plan.buckets.size(),
                        " fusion buckets of <= ", c.fusion_threshold_bytes(), " bytes, ", reducer_->buckets_in_place(),
                        " reduced in place", c.compression() == "none" ? "" : absl::StrCat(", as ", c.compression()),
                        ")");
  }
  StrategyTraffic traffic() const override {
    StrategyTraffic traffic;
    traffic.bytes_allreduced = reducer_->bytes_allreduced();
    traffic.wait = wait_;
    return traffic;
  }

 private:
  explicit AllReduceStrategy(const StrategyContext& context) : context_(context) {}

  absl::Status Connect(const CollectiveEntry& backend) {
    const ExperimentConfig& config = *context_.config;
    CollectiveOptions options;
    options.rank = context_.worker_index;
    options.size = context_.num_workers;
    if (backend.needs_store) {
      PSTRAIN_ASSIGN_OR_RETURN(cluster_store_, ClusterStore::Open(config, context_.worker_index, context_.transport,
                                                                  context_.listen_address));
      options.store = cluster_store_->store();
    }
    PSTRAIN_ASSIGN_OR_RETURN(const HostPort me, ParseHostPort(config.cluster().worker_hosts(context_.worker_index)));
    options.host = me.host == "localhost" ? "127.0.0.1" : me.host;
    options.prefix = absl::StrCat("allreduce/", config.name());
    options.timeout = absl::Seconds(config.timeouts().sync_step_seconds());
    options.connect_timeout = absl::Seconds(config.timeouts().startup_seconds());
    if (config.hierarchical_allreduce()) {
      const std::vector<std::string> hosts(config.cluster().worker_hosts().begin(),
                                           config.cluster().worker_hosts().end());
      PSTRAIN_ASSIGN_OR_RETURN(const std::vector<int> host_of, HostsOfWorkers(hosts, config.workers_per_host()));
      PSTRAIN_ASSIGN_OR_RETURN(collective_, CreateHierarchicalCollective(backend, options, host_of));
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(collective_, backend.create(options));
    }
    LOG(INFO) << "worker " << context_.worker_index << ": joined the " << CollectiveOf(config) << " all-reduce of "
              << options.size << " workers";
    if (config.security().has_tls() || !config.security().token_file().empty()) {
      LOG(WARNING) << "security: the " << CollectiveOf(config)
                   << " all-reduce's own connections carry gradients without TLS or the token (only its rendezvous "
                      "store is protected): docs/SECURITY.md";
    }
    return absl::OkStatus();
  }

  StrategyContext context_;
  std::unique_ptr<ClusterStore> cluster_store_;  // collectives that meet through it
  std::unique_ptr<Collective> collective_;
  std::unique_ptr<FusedAllReducer> reducer_;
  std::vector<std::unique_ptr<LocalOptimizer>> optimizers_;
  absl::Duration wait_;
};

StrategyNeeds Needs(const ExperimentConfig& c) {
  StrategyNeeds needs;
  needs.collective = CollectiveOf(c);
  absl::StatusOr<CollectiveEntry> backend = CollectiveRegistry().Find(needs.collective);
  // Device buffers (nccl): the gradients stay on the GPUs.
  needs.host_mirrors = !backend.ok() || backend->host_buffers;
  if (backend.ok() && !backend->host_buffers) {
    needs.devices = {"gpu"};
    needs.unscales_on_device = true;  // the NCCL strategy (nccl_strategy.h)
  }
  needs.launched_by_mpirun = backend.ok() && backend->launched_by_mpirun;
  needs.elastic_group = needs.collective == "gloo" && !c.hierarchical_allreduce();
  return needs;
}

// Elastic membership (data.sharding dynamic, elastic.*) re-forms a Gloo
// group at step boundaries (elastic_allreduce.h): mpirun's ranks are fixed
// for its life, a hierarchical group's hosts are planned at the start.
absl::Status CheckElastic(const ExperimentConfig& c, const CollectiveEntry& backend, const ConfigChecker& ck) {
  const bool membership =
      c.elastic().on_worker_lost() != ElasticConfig::stop ||
      (c.elastic().min_workers() != 0 && c.elastic().min_workers() != c.cluster().worker_hosts_size());
  if (c.data().sharding() != DataConfig::dynamic && !membership) return absl::OkStatus();
  const std::string why =
      " for an elastic all-reduce (data.sharding dynamic, elastic.*: the group re-forms at "
      "step boundaries";
  if (CollectiveOf(c) != "gloo") {
    return ck.Fail("collective",
                   absl::StrCat("gloo", why, "; ",
                                backend.launched_by_mpirun ? "an mpirun's ranks are fixed for its life"
                                                           : "NCCL communicators are not re-formed yet",
                                ")"),
                   absl::StrCat("'", CollectiveOf(c), "'"));
  }
  if (c.hierarchical_allreduce()) {
    return ck.Fail("hierarchical_allreduce", absl::StrCat("false", why, "; a hierarchical group's hosts are fixed)"),
                   "true");
  }
  if (c.data().sharding() != DataConfig::dynamic) {
    return ck.Fail("data.sharding", absl::StrCat("dynamic", why, "; static shards are cut by the listed workers)"),
                   absl::StrCat("'", DataConfig::Sharding_Name(c.data().sharding()), "'"));
  }
  if (c.model().tables_size() > 0) {
    return ck.Fail("model.tables", absl::StrCat("none", why, "; tables beside it are not elastic yet)"),
                   absl::StrCat(c.model().tables_size(), " tables"));
  }
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("elastic.regroup_seconds", c.elastic().regroup_seconds()));
  return ck.Positive("elastic.join_every_steps", c.elastic().join_every_steps());
}

// collective: a registered one this build has; hierarchical only over a host
// collective.
absl::Status Check(const ExperimentConfig& c, const ConfigChecker& ck) {
  // The configured collective, or the device's default (nccl on GPUs), must
  // be one this build has.
  PSTRAIN_RETURN_IF_ERROR(ck.Registered("collective", CollectiveOf(c), CollectiveRegistry()));
  PSTRAIN_ASSIGN_OR_RETURN(const CollectiveEntry backend, CollectiveRegistry().Find(CollectiveOf(c)));
  if (c.hierarchical_allreduce() && !backend.host_buffers) {
    return ck.Fail("hierarchical_allreduce",
                   absl::StrCat("false with collective ", CollectiveOf(c),
                                " (hierarchical all-reduce composes a host collective: gloo or mpi)"),
                   "true");
  }
  if (!backend.host_buffers && c.compression() != "none") {
    return ck.Fail("compression",
                   absl::StrCat("none with collective ", CollectiveOf(c),
                                " (the NCCL all-reduce of GPU buffers does not compress yet; gloo and mpi do)"),
                   absl::StrCat("'", c.compression(), "'"));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckElastic(c, backend, ck));
  if (c.workers_per_host() < 0) {
    return ck.Fail("workers_per_host", "a number >= 0", ConfigChecker::Num(c.workers_per_host()));
  }
  if (c.hierarchical_allreduce()) {
    const std::vector<std::string> hosts(c.cluster().worker_hosts().begin(), c.cluster().worker_hosts().end());
    if (absl::Status s = HostsOfWorkers(hosts, c.workers_per_host()).status(); !s.ok()) {
      return ck.Fail("workers_per_host", "a number of workers per host that divides the workers", s.message());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context) {
  PSTRAIN_ASSIGN_OR_RETURN(const CollectiveEntry backend, CollectiveRegistry().Find(CollectiveOf(*context.config)));
  if (!backend.create) return CreateNcclStrategy(context, NcclScope::kAllWorkers);  // device buffers
  if (IsElasticAllReduce(*context.config)) return CreateElasticAllReduce(context);
  return AllReduceStrategy::Create(context, backend);
}

const bool kRegistered = StrategyRegistry().Register(
    "allreduce", {
                     .summary = "Horovod-style all-reduce between workers, no parameter servers (collective: gloo or "
                                "mpi on host buffers, nccl on GPUs)",
                     .all_reduce_specs = {},
                     .local_parameter_device_gpu = false,
                     .reads_collective = true,
                     .compressions = {"fp16", "bf16"},
                     .needs = Needs,
                     .check = Check,
                     .create = Create,
                     .tables_beside = true,
                 });

}  // namespace
}  // namespace pstrain
