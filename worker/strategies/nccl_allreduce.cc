// NCCL all-reduce of gradients kept on the GPUs (see nccl_strategy.h).
//
// Every local replica is one NCCL rank (ranks = workers x replicas). The
// gradients are fused as every backend fuses them (worker/fusion.h: buckets
// of up to fusion_threshold_bytes in backward order, handed out in plan
// order). A model's gradients are adjacent on the device (models/model.h),
// so a bucket is one contiguous range and needs no packing. As the last
// gradient of a bucket becomes final in a replica's backward, its hook
// records an event on the compute stream and queues, on the replica's
// communication stream (after that event), one in-place ncclAllReduce(avg)
// of the bucket: communication overlaps the rest of backward, and NCCL's mean
// over ranks of per-rank mean gradients is the gradient of the whole global
// batch. In
// AfterStep the compute stream waits for the communication stream, applies
// the optimizer's CUDA implementation (optim/cuda/, the CPU update element for
// element, same learning-rate schedule), and the host waits for both with the
// step deadline.
//
// Loss scaling (ReplicaSet::SetLossScale; StrategyNeeds::unscales_on_device):
// the gradients arrive scaled. After the all-reduce (a mean of scaled
// gradients is the scaled mean) AfterStep divides them by the scale on the
// device and flags any that is not finite, in one kernel per run of adjacent
// gradients; the host waits for that (with the step deadline) and reads the
// flag. Every rank holds the same reduced gradients, so every rank sees the
// same overflow: all skip the optimizer alike, and the replica set hears of
// it (MarkGradientsNotFinite) for the loss scaler.
//
// NcclScope::kNone (independent) is the same strategy without the collective:
// no communicator, no buckets, replica 0's initial values copied to the other
// replicas, each replica's optimizer applied to its own gradients.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_context.h"
#include "device/cuda/elementwise.h"
#include "glog/logging.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "worker/collective/cluster_store.h"
#include "worker/collective/nccl_group.h"
#include "worker/fusion.h"
#include "worker/report_table.h"
#include "worker/strategies/nccl_strategy.h"

namespace pstrain {
namespace {

class NcclAllReduceStrategy : public Strategy {
 public:
  static absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context, NcclScope scope) {
    if (context.replicas->mirrored()) {
      return absl::InternalError("NCCL strategy given replicas with host mirrors (its needs say none)");
    }
    if (scope == NcclScope::kOneWorker && context.num_workers != 1) {
      return absl::InternalError("NCCL strategy for the GPUs of one worker run with several workers");
    }
    PSTRAIN_ASSIGN_OR_RETURN(LearningRateSchedule schedule,
                             LearningRateSchedule::Create(context.config->optimizer(), context.total_steps));
    std::unique_ptr<NcclAllReduceStrategy> s(new NcclAllReduceStrategy(context, scope, std::move(schedule)));
    PSTRAIN_RETURN_IF_ERROR(s->Prepare());
    if (s->syncs()) PSTRAIN_RETURN_IF_ERROR(s->Connect());
    return std::unique_ptr<Strategy>(std::move(s));
  }

  ~NcclAllReduceStrategy() override {
    for (Replica& rep : per_replica_) {
      if (rep.ready != nullptr) cudaEventDestroy(rep.ready);
      if (rep.reduced != nullptr) cudaEventDestroy(rep.reduced);
      if (rep.comm_stream != nullptr) cudaStreamDestroy(rep.comm_stream);
    }
    group_.reset();
    cluster_store_.reset();
  }

  absl::StatusOr<int64_t> Start() override {
    if (!syncs()) {
      PSTRAIN_RETURN_IF_ERROR(CopyReplicaZeroValues());
      return 0;
    }
    // Everyone starts from rank 0's values (the chief's replica 0).
    std::vector<absl::Status> errors(replicas().size());
    replicas().ForEach([&](int r) {
      cuda::CudaContext& ctx = Ctx(r);
      for (Variable& v : replicas().device_variables(r)) {
        absl::Status s = group_->Broadcast(r, cuda::DevicePtr(v.value), v.value.num_elements(), 0, ctx.stream());
        if (!s.ok()) {
          errors[r] = s;
          return;
        }
      }
      errors[r] = group_->Wait(r, ctx.stream());
    });
    PSTRAIN_RETURN_IF_ERROR(FirstError(errors));
    return 0;
  }

  absl::Status BeforeStep(int64_t) override {
    if (!syncs()) return absl::OkStatus();
    for (Replica& rep : per_replica_) rep.buckets->Reset();
    return absl::OkStatus();
  }

  // Runs on replica r's backward thread; only that thread touches its
  // tracker during a step.
  GradientReadyHook HookFor(int r) override {
    if (!syncs()) return nullptr;
    return [this, r](int v) {
      per_replica_[r].buckets->MarkReady(v);
      QueueReadyBuckets(r);
    };
  }

  absl::Status AfterStep(int64_t step) override {
    const float lr = schedule_.At(step);
    std::vector<absl::Status> errors(replicas().size());
    const absl::Time t0 = absl::Now();
    replicas().ForEach([&](int r) {
      if (syncs()) {
        errors[r] = FinishReductions(r);
        if (!errors[r].ok()) return;
      }
      if (replicas().loss_scale() > 0) {
        absl::StatusOr<bool> finite = UnscaleGradients(r);
        if (!finite.ok() || !*finite) {
          errors[r] = finite.status();
          if (finite.ok()) replicas().MarkGradientsNotFinite(r);
          return;  // an overflowed step changes no variable
        }
      }
      ApplyOptimizer(r, lr);
      errors[r] = WaitForStream(r);
    });
    wait_ += absl::Now() - t0;
    return FirstError(errors);
  }

  absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) override {
    if (context_.num_workers == 1 || !syncs()) return ReportsFromTable(mine, {}, 1);
    // Every worker's report, by summing rows each worker fills (replica 0
    // carries the row; the worker's other replicas add zeros).
    const std::vector<float> table = ReportTable(mine, context_.num_workers);
    std::vector<float> summed(table.size());
    std::vector<absl::Status> errors(replicas().size());
    replicas().ForEach([&](int r) {
      cuda::CudaContext& ctx = Ctx(r);
      Tensor host = ctx.AllocateHost({static_cast<int64_t>(table.size())});
      if (r == 0) std::copy(table.begin(), table.end(), host.data());
      Tensor device = ctx.Allocate(host.shape());
      ctx.Convert(host, device);
      errors[r] = group_->AllReduceSum(r, cuda::DevicePtr(device), table.size(), ctx.stream());
      if (errors[r].ok()) errors[r] = group_->Wait(r, ctx.stream());
      if (errors[r].ok() && r == 0) {
        ctx.Convert(device, host);
        std::copy(host.data(), host.data() + table.size(), summed.begin());
      }
    });
    PSTRAIN_RETURN_IF_ERROR(FirstError(errors));
    return ReportsFromTable(mine, summed, context_.num_workers);
  }

  std::string Describe() const override {
    if (!syncs()) {
      return absl::StrCat(context_.config->variable_update(), " (", per_replica_.size(),
                          " GPU replicas, variables and optimizer on the devices, no synchronisation)");
    }
    return scope_ == NcclScope::kOneWorker
               ? absl::StrCat(context_.config->variable_update(), " (NCCL across the worker's ", per_replica_.size(),
                              " GPUs)")
               : absl::StrCat(context_.config->variable_update(), " (NCCL, ", context_.num_workers, " workers x ",
                              per_replica_.size(), " GPUs, ", plan_.buckets.size(),
                              " fusion buckets of <= ", context_.config->fusion_threshold_bytes(), " bytes)");
  }
  StrategyTraffic traffic() const override {
    StrategyTraffic traffic;
    traffic.wait = wait_;
    return traffic;
  }

 private:
  struct Replica {
    cudaStream_t comm_stream = nullptr;
    std::vector<std::pair<float*, int64_t>> gradient_runs;  // adjacent gradients: start, elements
    std::shared_ptr<Buffer> non_finite;                     // device int: an unscaled gradient overflowed
    Tensor non_finite_host;                                 // pinned copy of it, read after the step's wait
    cudaEvent_t ready = nullptr;                            // compute stream reached a gradient-ready point
    cudaEvent_t reduced = nullptr;                          // communication stream finished the step's all-reduces
    std::unique_ptr<Optimizer> optimizer;                   // CUDA implementation, on the replica's stream
    std::vector<std::vector<Tensor>> slots;                 // [variable][slot], on the device
    absl::Status error;                                     // first error of this step's hooks
    std::unique_ptr<BucketTracker> buckets;                 // this step's fusion buckets
  };

  NcclAllReduceStrategy(const StrategyContext& context, NcclScope scope, LearningRateSchedule schedule)
      : context_(context), scope_(scope), schedule_(std::move(schedule)) {}

  ReplicaSet& replicas() { return *context_.replicas; }
  bool syncs() const { return scope_ != NcclScope::kNone; }

  // Queues what backward did not announce and has the compute stream wait
  // for every all-reduce of the step; the first error of the step's hooks.
  absl::Status FinishReductions(int r) {
    Replica& rep = per_replica_[r];
    if (!rep.error.ok()) return rep.error;
    rep.buckets->MarkAllReady();
    QueueReadyBuckets(r);
    if (!rep.error.ok()) return rep.error;
    PSTRAIN_CUDA_CHECK(cudaEventRecord(rep.reduced, rep.comm_stream));
    PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(Ctx(r).stream(), rep.reduced, 0));
    return absl::OkStatus();
  }

  // Waits (with the step deadline where peers take part) for replica r's
  // queued work.
  absl::Status WaitForStream(int r) {
    if (syncs()) return group_->Wait(r, Ctx(r).stream());
    Ctx(r).Synchronize();  // local work only: no peer to wait for
    return absl::OkStatus();
  }

  // Divides replica r's gradients by the loss scale on its stream and waits
  // for them; whether every one is finite.
  absl::StatusOr<bool> UnscaleGradients(int r) {
    Replica& rep = per_replica_[r];
    cuda::CudaContext& ctx = Ctx(r);
    int* flag = static_cast<int*>(rep.non_finite->data());
    PSTRAIN_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), ctx.stream()));
    const float factor = 1.0f / replicas().loss_scale();
    for (const auto& [start, elements] : rep.gradient_runs) {
      cuda::ScaleAndFlagNonFinite(start, factor, elements, flag, ctx.stream());
    }
    PSTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(rep.non_finite_host.data(), flag, sizeof(int), cudaMemcpyDeviceToHost, ctx.stream()));
    PSTRAIN_RETURN_IF_ERROR(WaitForStream(r));
    int overflowed = 0;
    std::memcpy(&overflowed, rep.non_finite_host.data(), sizeof(int));
    return overflowed == 0;
  }

  // Runs of adjacent gradients among `vars` (a model's gradients usually
  // form one), so unscaling takes a kernel per run, not per variable.
  static std::vector<std::pair<float*, int64_t>> GradientRuns(const std::vector<Variable>& vars) {
    std::vector<std::pair<float*, int64_t>> runs;
    for (const Variable& v : vars) {
      float* start = cuda::DevicePtr(v.grad);
      const int64_t n = v.grad.num_elements();
      if (!runs.empty() && runs.back().first + runs.back().second == start) {
        runs.back().second += n;
      } else {
        runs.emplace_back(start, n);
      }
    }
    return runs;
  }

  // Queues replica r's optimizer over all its variables, in place, on its
  // stream: one launch for the model (Optimizer::ApplyAll).
  void ApplyOptimizer(int r, float lr) {
    Replica& rep = per_replica_[r];
    std::vector<Variable>& vars = replicas().device_variables(r);
    std::vector<std::vector<float*>> slots(vars.size());
    std::vector<VariableUpdate> updates;
    for (size_t v = 0; v < vars.size(); ++v) {
      for (const Tensor& slot : rep.slots[v]) slots[v].push_back(cuda::DevicePtr(slot));
      updates.push_back({.value = cuda::DevicePtr(vars[v].value),
                         .grad = cuda::DevicePtr(vars[v].grad),
                         .n = vars[v].value.num_elements(),
                         .slots = slots[v].data()});
    }
    rep.optimizer->ApplyAll(updates, {.learning_rate = lr});
  }

  // kNone's start: every replica from replica 0's values (peer copies; the
  // replicas may share a GPU).
  absl::Status CopyReplicaZeroValues() {
    const std::vector<Variable>& source = replicas().device_variables(0);
    const int source_device = replicas().context(0).device().ordinal;
    for (int r = 1; r < replicas().size(); ++r) {
      cuda::CudaContext& ctx = Ctx(r);
      ctx.MakeCurrent();
      std::vector<Variable>& target = replicas().device_variables(r);
      for (size_t v = 0; v < source.size(); ++v) {
        PSTRAIN_CUDA_CHECK(cudaMemcpyPeerAsync(cuda::DevicePtr(target[v].value), ctx.device().ordinal,
                                               cuda::DevicePtr(source[v].value), source_device,
                                               source[v].value.num_elements() * sizeof(float), ctx.stream()));
      }
      ctx.Synchronize();
    }
    replicas().context(0).MakeCurrent();
    return absl::OkStatus();
  }
  cuda::CudaContext& Ctx(int r) { return cuda::AsCuda(replicas().context(r)); }

  // Queues the all-reduce of every bucket of replica r that is ready, in plan
  // order, on its communication stream after the compute stream's work so
  // far.
  void QueueReadyBuckets(int r) {
    Replica& rep = per_replica_[r];
    for (int b = rep.buckets->NextReady(); b >= 0 && rep.error.ok(); b = rep.buckets->NextReady()) {
      rep.buckets->Advance();
      cuda::CudaContext& ctx = Ctx(r);
      // A bucket holds consecutive variables, highest first; its range
      // starts at the lowest one's gradient.
      const Variable& first = replicas().device_variables(r)[plan_.buckets[b].back()];
      PSTRAIN_CUDA_CHECK(cudaEventRecord(rep.ready, ctx.stream()));
      PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(rep.comm_stream, rep.ready, 0));
      rep.error = group_->AllReduceMean(r, cuda::DevicePtr(first.grad), plan_.bucket_elements[b], rep.comm_stream);
    }
  }

  // The fusion plan over the model's variables; every bucket must be one
  // contiguous range of device memory in every replica.
  absl::Status PlanFusion() {
    std::vector<int64_t> elements;
    for (const Variable& v : replicas().device_variables(0)) elements.push_back(v.grad.num_elements());
    plan_ = FusionPlan::Make(elements, context_.config->fusion_threshold_bytes());
    for (int r = 0; r < replicas().size(); ++r) {
      const std::vector<Variable>& vars = replicas().device_variables(r);
      for (const std::vector<int>& bucket : plan_.buckets) {
        for (int v = bucket.back(); v < bucket.front(); ++v) {
          if (cuda::DevicePtr(vars[v].grad) + vars[v].grad.num_elements() != cuda::DevicePtr(vars[v + 1].grad)) {
            return absl::InternalError(absl::StrCat("NCCL fusion: the gradients of ", vars[v].name, " and ",
                                                    vars[v + 1].name, " are not adjacent on replica ", r));
          }
        }
      }
      per_replica_[r].buckets = std::make_unique<BucketTracker>(&plan_, /*replicas=*/1);
    }
    return absl::OkStatus();
  }

  static absl::Status FirstError(const std::vector<absl::Status>& errors) {
    for (const absl::Status& s : errors) PSTRAIN_RETURN_IF_ERROR(s);
    return absl::OkStatus();
  }

  absl::Status Connect() {
    const ExperimentConfig& config = *context_.config;
    KeyValueStore* store = nullptr;
    if (context_.num_workers > 1) {
      PSTRAIN_ASSIGN_OR_RETURN(cluster_store_, ClusterStore::Open(config, context_.worker_index, context_.transport,
                                                                  context_.listen_address));
      store = cluster_store_->store();
    }
    NcclGroupOptions options;
    options.worker_index = context_.worker_index;
    options.num_workers = context_.num_workers;
    for (int r = 0; r < replicas().size(); ++r) options.devices.push_back(replicas().context(r).device().ordinal);
    options.store = store;
    options.key = absl::StrCat("nccl/", config.name(), "/unique_id");
    options.join_timeout = absl::Seconds(config.timeouts().startup_seconds());
    options.op_timeout = absl::Seconds(config.timeouts().sync_step_seconds());
    PSTRAIN_ASSIGN_OR_RETURN(group_, NcclGroup::Create(options));
    return absl::OkStatus();
  }

  // Streams, events, and each replica's optimizer with its slots. Fails
  // (naming the GPU optimizers there are) when optimizer.name has no CUDA
  // implementation.
  absl::Status Prepare() {
    per_replica_.resize(replicas().size());
    for (int r = 0; r < replicas().size(); ++r) {
      Replica& rep = per_replica_[r];
      cuda::CudaContext& ctx = Ctx(r);
      ctx.MakeCurrent();
      PSTRAIN_ASSIGN_OR_RETURN(rep.optimizer,
                               CreateOptimizer(context_.config->optimizer(), DeviceKind::kCuda, ctx.stream()));
      PSTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&rep.comm_stream, cudaStreamNonBlocking));
      PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&rep.ready, cudaEventDisableTiming));
      PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&rep.reduced, cudaEventDisableTiming));
      rep.gradient_runs = GradientRuns(replicas().device_variables(r));
      rep.non_finite = ctx.AllocateBytes(sizeof(int));
      rep.non_finite_host = ctx.AllocateHost({1});
      for (const Variable& v : replicas().device_variables(r)) {
        rep.slots.emplace_back();
        for (int s = 0; s < rep.optimizer->num_slots(); ++s) rep.slots.back().push_back(ctx.Allocate(v.value.shape()));
      }
    }
    replicas().context(0).MakeCurrent();
    return syncs() ? PlanFusion() : absl::OkStatus();
  }

  StrategyContext context_;
  const NcclScope scope_;
  const LearningRateSchedule schedule_;
  std::unique_ptr<ClusterStore> cluster_store_;  // across workers only
  std::unique_ptr<NcclGroup> group_;
  FusionPlan plan_;  // per_replica_'s trackers point at it
  std::vector<Replica> per_replica_;
  absl::Duration wait_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Strategy>> CreateNcclStrategy(const StrategyContext& context, NcclScope scope) {
  return NcclAllReduceStrategy::Create(context, scope);
}

}  // namespace pstrain
