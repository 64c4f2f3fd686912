// allreduce: Horovod-style data parallelism without parameter servers.
//
// Every worker holds the whole model. The chief serves the rendezvous store on
// its worker port; all workers join one Gloo communicator (ring all-reduce
// over TCP). Gradients are packed, in backward order, into fusion buffers of
// up to fusion_threshold_bytes; a communication thread all-reduces each
// buffer as soon as every replica's backward has produced all of its
// gradients (gradient-ready hooks), overlapping the rest of backward. The
// worker's replicas are first averaged into the buffer (local reduction),
// then the buffer is summed across workers and divided by their number, and
// every replica applies the same optimizer update. On GPUs (device gpu) the
// gradients stay on the devices and NCCL reduces them instead
// (worker/strategies/nccl_allreduce.cc).
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/collective/cluster_store.h"
#include "worker/collective/collective.h"
#include "worker/local_optimizer.h"
#include "worker/report_table.h"
#include "worker/strategies/nccl_strategy.h"
#include "worker/strategy.h"

namespace pstrain {
namespace {

class AllReduceStrategy : public Strategy {
 public:
  static absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context) {
    std::unique_ptr<AllReduceStrategy> s(new AllReduceStrategy(context));
    PSTRAIN_RETURN_IF_ERROR(s->Connect());
    PSTRAIN_ASSIGN_OR_RETURN(s->optimizers_, LocalOptimizer::ForReplicas(context.config->optimizer(), *context.replicas,
                                                                         context.total_steps));
    s->PlanBuckets();
    return std::unique_ptr<Strategy>(std::move(s));
  }

  ~AllReduceStrategy() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (comm_thread_.joinable()) comm_thread_.join();
  }

  absl::Status Start() override {
    // Everyone starts from the chief's replica 0.
    for (Variable& v : context_.replicas->variables(0)) {
      PSTRAIN_RETURN_IF_ERROR(collective_->Broadcast(v.value.data(), v.value.num_elements(), 0));
    }
    context_.replicas->BroadcastValues(0);
    comm_thread_ = std::thread([this] { CommunicationLoop(); });
    return absl::OkStatus();
  }

  absl::Status BeforeStep(int64_t step) override {
    absl::MutexLock lock(&mu_);
    std::fill(ready_count_.begin(), ready_count_.end(), 0);
    next_bucket_ = 0;
    step_error_ = absl::OkStatus();
    step_active_ = true;
    return absl::OkStatus();
  }

  GradientReadyHook HookFor(int replica) override {
    return [this](int variable) {
      absl::MutexLock lock(&mu_);
      ++ready_count_[variable];  // the communication thread waits on the counts
    };
  }

  absl::Status AfterStep(int64_t step) override {
    {
      // Wait for the communication thread to finish every bucket.
      absl::MutexLock lock(&mu_);
      const absl::Time start = absl::Now();
      mu_.Await(absl::Condition(this, &AllReduceStrategy::StepDone));
      wait_ += absl::Now() - start;
      step_active_ = false;
      PSTRAIN_RETURN_IF_ERROR(step_error_);
    }
    context_.replicas->ForEach([&](int r) { optimizers_[r]->Apply(context_.replicas->variables(r), step); });
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
    return absl::StrCat("allreduce (Gloo ring over TCP, ", context_.num_workers, " workers, ", buckets_.size(),
                        " fusion buffers of <= ", context_.config->fusion_threshold_bytes(), " bytes)");
  }
  absl::Duration wait_time() const override { return wait_; }

 private:
  explicit AllReduceStrategy(const StrategyContext& context) : context_(context) {}

  absl::Status Connect() {
    const ExperimentConfig& config = *context_.config;
    PSTRAIN_ASSIGN_OR_RETURN(
        cluster_store_, ClusterStore::Open(config, context_.worker_index, context_.transport, context_.listen_address));
    GlooOptions options;
    options.rank = context_.worker_index;
    options.size = context_.num_workers;
    PSTRAIN_ASSIGN_OR_RETURN(const HostPort me, ParseHostPort(config.cluster().worker_hosts(context_.worker_index)));
    options.host = me.host;
    if (options.host == "localhost") options.host = "127.0.0.1";
    options.store = cluster_store_->store();
    options.prefix = absl::StrCat("allreduce/", config.name());
    options.timeout = absl::Seconds(config.timeouts().sync_step_seconds());
    options.connect_timeout = absl::Seconds(config.timeouts().startup_seconds());
    PSTRAIN_ASSIGN_OR_RETURN(collective_, CreateGlooCollective(options));
    LOG(INFO) << "worker " << context_.worker_index << ": joined the all-reduce ring of " << options.size;
    return absl::OkStatus();
  }

  // Buckets of variables in backward order (last variable first), each at
  // most fusion_threshold_bytes (a larger variable gets its own bucket).
  void PlanBuckets() {
    const std::vector<Variable>& vars = context_.replicas->variables(0);
    const int64_t limit = context_.config->fusion_threshold_bytes();
    int64_t bytes = 0;
    for (int v = static_cast<int>(vars.size()) - 1; v >= 0; --v) {
      const int64_t size = static_cast<int64_t>(vars[v].grad.num_bytes());
      if (buckets_.empty() || limit == 0 || bytes + size > limit) {
        buckets_.emplace_back();
        bytes = 0;
      }
      buckets_.back().push_back(v);
      bytes += size;
    }
    {
      absl::MutexLock lock(&mu_);
      ready_count_.assign(vars.size(), 0);
    }
    size_t largest = 0;
    for (const auto& b : buckets_) {
      size_t n = 0;
      for (int v : b) n += vars[v].grad.num_elements();
      largest = std::max(largest, n);
    }
    fusion_.resize(largest);
  }

  bool BucketReady(size_t b) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (int v : buckets_[b]) {
      if (ready_count_[v] < context_.replicas->size()) return false;
    }
    return true;
  }
  // The communication thread has work, or must stop.
  bool NextBucketReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ ||
           (step_active_ && next_bucket_ < buckets_.size() && step_error_.ok() && BucketReady(next_bucket_));
  }
  // Every bucket of the step is reduced, or one failed.
  bool StepDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return next_bucket_ == buckets_.size() || !step_error_.ok();
  }

  void CommunicationLoop() {
    absl::MutexLock lock(&mu_);
    while (true) {
      mu_.Await(absl::Condition(this, &AllReduceStrategy::NextBucketReady));
      if (stopping_) return;
      const size_t b = next_bucket_;
      mu_.Unlock();
      // Buckets, the fusion buffer and the gradients are only touched here
      // while a step is active (the training thread waits in AfterStep).
      absl::Status s = ReduceBucket(buckets_[b]);
      mu_.Lock();
      if (!s.ok()) step_error_ = s;
      ++next_bucket_;
    }
  }

  // Local mean over replicas into the fusion buffer, sum across workers,
  // divide, copy back to every replica.
  absl::Status ReduceBucket(const std::vector<int>& bucket) {
    ReplicaSet& replicas = *context_.replicas;
    const int n = replicas.size();
    size_t offset = 0;
    for (int v : bucket) {
      const size_t count = replicas.variables(0)[v].grad.num_elements();
      float* dst = fusion_.data() + offset;
      std::copy_n(replicas.variables(0)[v].grad.data(), count, dst);
      for (int r = 1; r < n; ++r) {
        const float* g = replicas.variables(r)[v].grad.data();
        for (size_t i = 0; i < count; ++i) dst[i] += g[i];
      }
      offset += count;
    }
    PSTRAIN_RETURN_IF_ERROR(collective_->AllReduceSum(fusion_.data(), offset));
    const float scale = 1.0f / static_cast<float>(n * context_.num_workers);
    offset = 0;
    for (int v : bucket) {
      const size_t count = replicas.variables(0)[v].grad.num_elements();
      const float* src = fusion_.data() + offset;
      for (int r = 0; r < n; ++r) {
        float* g = replicas.variables(r)[v].grad.data();
        for (size_t i = 0; i < count; ++i) g[i] = src[i] * scale;
      }
      offset += count;
    }
    return absl::OkStatus();
  }

  StrategyContext context_;
  std::unique_ptr<ClusterStore> cluster_store_;
  std::unique_ptr<Collective> collective_;
  std::vector<std::unique_ptr<LocalOptimizer>> optimizers_;
  std::vector<std::vector<int>> buckets_;
  std::vector<float> fusion_;
  absl::Duration wait_;

  mutable absl::Mutex mu_;
  std::vector<int> ready_count_ ABSL_GUARDED_BY(mu_);  // replicas whose gradient of variable v is final
  size_t next_bucket_ ABSL_GUARDED_BY(mu_) = 0;        // buckets all-reduced this step
  bool step_active_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status step_error_ ABSL_GUARDED_BY(mu_);
  std::thread comm_thread_;
};

StrategyNeeds Needs(const ExperimentConfig& c) {
  StrategyNeeds needs;
  if (c.device() == "gpu") {  // the gradients stay on the GPUs
    needs.host_mirrors = false;
    needs.collective = "nccl";
  } else {
    needs.collective = "gloo";
  }
  return needs;
}

absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context) {
  if (context.config->device() == "gpu") return CreateNcclStrategy(context, NcclScope::kAllWorkers);
  return AllReduceStrategy::Create(context);
}

const bool kRegistered = StrategyRegistry().Register(
    "allreduce",
    {
        .summary = "Horovod-style all-reduce between workers, no parameter servers (Gloo on CPUs, NCCL on GPUs)",
        .all_reduce_specs = {},
        .local_parameter_device_gpu = false,
        .needs = Needs,
        .check = nullptr,
        .create = Create,
    });

}  // namespace
}  // namespace pstrain
