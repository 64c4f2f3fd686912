#include "worker/replica_set.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "optim/loss_scaler.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<ReplicaSet>> ReplicaSet::Create(const ModelConfig& config, int replicas,
                                                               const ReplicaOptions& options) {
  if (replicas < 1) return absl::InvalidArgumentError("devices_per_worker must be >= 1");
  std::unique_ptr<ReplicaSet> set(new ReplicaSet);
  const bool gpu = options.device_kind == DeviceKind::kCuda;
  const int gpus = gpu ? CountDevices(DeviceKind::kCuda) : 1;
  if (gpu && gpus == 0) {  // the context's own error says why (no GPU, or built without CUDA)
    absl::Status why = CreateDeviceContext(Device{DeviceKind::kCuda, 0}).status();
    return absl::FailedPreconditionError(absl::StrCat("device gpu: ", why.message()));
  }
  for (int r = 0; r < replicas; ++r) {
    const Device device = gpu ? Device{DeviceKind::kCuda, (options.worker_index * replicas + r) % gpus} : Device::Cpu();
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceContext> context, CreateDeviceContext(device));
    PSTRAIN_RETURN_IF_ERROR(context->SetPrecision(options.precision));
    context->SetFp32Math(options.fp32_math);
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(config, context.get()));
    if (options.wrap_model) {
      PSTRAIN_ASSIGN_OR_RETURN(model, options.wrap_model(std::move(model), r));
    }
    set->contexts_.push_back(std::move(context));
    set->models_.push_back(std::move(model));
  }
  if ((gpu || options.copy_engine) && options.host_mirrors) {
    set->mirrors_.resize(replicas);
    for (int r = 0; r < replicas; ++r) {
      DeviceContext& ctx = *set->contexts_[r];
      const std::vector<Variable>& vars = set->models_[r]->variables();
      // The mirrors' gradients are adjacent in variable order too (as the
      // model's are), so host all-reduces work on buckets in place.
      int64_t total = 0;
      for (const Variable& v : vars) total += v.grad.num_elements();
      const Tensor arena = ctx.AllocateHost({std::max<int64_t>(total, 1)});
      int64_t offset = 0;
      for (const Variable& v : vars) {
        const size_t bytes = static_cast<size_t>(v.grad.num_elements()) * sizeof(float);
        Tensor grad(v.grad.shape(), DType::kFloat32, Buffer::Borrow(arena.data() + offset, bytes, arena.buffer()));
        set->mirrors_[r].push_back({v.name, ctx.AllocateHost(v.value.shape()), grad});
        offset += v.grad.num_elements();
      }
      set->engines_.push_back(options.copy_engine ? options.copy_engine(ctx) : ctx.NewCopyEngine());
    }
  }
  set->interconnect_ = options.interconnect;
  set->host_mirrors_ = options.host_mirrors;
  set->download_gradients_ = options.download_gradients;
  set->zero_non_finite_gradients_ = options.zero_non_finite_gradients;
  set->gradients_finite_.assign(replicas, 1);
  set->threads_per_replica_ = std::max(1, omp_get_max_threads() / replicas);
  return set;
}

ReplicaSet::~ReplicaSet() {
  engines_.clear();  // drained: no copy touches the mirrors after this
  mirrors_.clear();  // pinned memory goes back to the contexts' allocators
  models_.clear();   // models use their contexts
  contexts_.clear();
}

void ReplicaSet::ForEach(const std::function<void(int)>& fn) {
  if (size() == 1) {
    contexts_[0]->MakeCurrent();
    fn(0);
    return;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < size(); ++r) {
    threads.emplace_back([this, r, &fn] {
      omp_set_num_threads(threads_per_replica_);  // this thread's OpenMP team size
      contexts_[r]->MakeCurrent();
      fn(r);
    });
  }
  for (std::thread& t : threads) t.join();
}

void ReplicaSet::DownloadGradient(int r, int variable, std::function<void()> done) {
  engines_[r]->Download(models_[r]->variables()[variable].grad, mirrors_[r][variable].grad,
                        [this, r, variable, queued = absl::Now(), done = std::move(done)] {
                          RecordCopy("download ", r, variable, queued);
                          if (done) done();
                        });
}

void ReplicaSet::UploadValue(int r, int variable) {
  const absl::Time start = absl::Now();
  engines_[r]->Upload(mirrors_[r][variable].value, models_[r]->variables()[variable].value);
  RecordCopy("upload ", r, variable, start);
}

void ReplicaSet::RecordCopy(absl::string_view lane, int r, int variable, absl::Time start) {
  if (timeline_ == nullptr) return;
  const Variable& v = mirrors_[r][variable];
  timeline_->Record(v.name, absl::StrCat(lane, r), start, absl::Now(),
                    absl::StrCat(R"("bytes": )", v.value.num_bytes()));
}

void ReplicaSet::SetLossScale(float scale) {
  CHECK(std::isfinite(scale) && scale > 0) << "loss scale " << scale;
  loss_scale_ = scale;
  for (auto& model : models_) model->SetLossScale(scale);
}

void ReplicaSet::UnscaleGradient(int r, int variable) {
  const Tensor& grad = variables(r)[variable].grad;
  const int64_t n = grad.num_elements();
  if (ScaleAndCheckFinite(grad.data(), n, 1.0f / loss_scale_)) return;
  gradients_finite_[r] = false;
  if (zero_non_finite_gradients_) std::fill_n(grad.data(), n, 0.0f);
}

float ReplicaSet::TrainStep(int r, const Tensor& images, const int32_t* labels, const GradientReadyHook& hook) {
  gradients_finite_[r] = true;
  if (loss_scale_ > 0 && GradientsOnHost(r)) {
    // Every gradient passes through the hook, unscaled on its way.
    std::vector<bool> unscaled(variables(r).size(), false);
    GradientReadyHook unscaling_hook = [&](int v) {
      UnscaleGradient(r, v);
      unscaled[v] = true;
      if (hook) hook(v);
    };
    const float loss = TrainStepWithHostGradients(r, images, labels, unscaling_hook);
    for (size_t v = 0; v < unscaled.size(); ++v) {
      if (!unscaled[v]) UnscaleGradient(r, static_cast<int>(v));
    }
    return loss;
  }
  return TrainStepWithHostGradients(r, images, labels, hook);
}

float ReplicaSet::TrainStepOverInterconnect(int r, const Tensor& images, const int32_t* labels,
                                            const GradientReadyHook& hook) {
  std::vector<Variable>& vars = variables(r);
  int64_t value_bytes = 0;
  for (const Variable& v : vars) value_bytes += v.value.num_bytes();
  if (host_mirrors_) interconnect_->Transfer({{kHostEndpoint, r, value_bytes}});
  if (!downloads_gradients()) return models_[r]->TrainStep(images, labels, hook);
  // As TrainStepWithHostGradients: downloads overlap backward when a
  // strategy's hook waits for them, else follow it.
  std::vector<bool> downloaded(vars.size(), false);
  GradientReadyHook download = [&](int v) {
    interconnect_->Transfer({{r, kHostEndpoint, static_cast<int64_t>(vars[v].grad.num_bytes())}});
    downloaded[v] = true;
    hook(v);
  };
  const float loss = models_[r]->TrainStep(images, labels, hook ? download : GradientReadyHook());
  int64_t left = 0;
  for (size_t v = 0; v < vars.size(); ++v) left += downloaded[v] ? 0 : vars[v].grad.num_bytes();
  interconnect_->Transfer({{r, kHostEndpoint, left}});
  return loss;
}

float ReplicaSet::TrainStepWithHostGradients(int r, const Tensor& images, const int32_t* labels,
                                             const GradientReadyHook& hook) {
  if (interconnect_) return TrainStepOverInterconnect(r, images, labels, hook);
  if (!mirrored()) return models_[r]->TrainStep(images, labels, hook);
  if (!upload_on_wait_) SyncModelValues(r);
  if (!download_gradients_) {
    const float loss = models_[r]->TrainStep(images, labels, hook);
    engines_[r]->Drain();         // the values' uploads are complete
    contexts_[r]->Synchronize();  // the gradients are read from other streams next
    return loss;
  }
  // Each gradient is downloaded while backward goes on; the hook sees it on
  // the copy engine's completion thread once it is in host memory.
  std::vector<bool> downloaded(mirrors_[r].size(), false);
  GradientReadyHook mirror_hook = [&](int v) {
    downloaded[v] = true;
    DownloadGradient(r, v, [&hook, v] { hook(v); });
  };
  const float loss = models_[r]->TrainStep(images, labels, hook ? mirror_hook : GradientReadyHook());
  for (size_t v = 0; v < downloaded.size(); ++v) {
    if (!downloaded[v]) DownloadGradient(r, static_cast<int>(v), nullptr);
  }
  engines_[r]->Drain();  // every gradient is in host memory, every hook has returned
  return loss;
}

void ReplicaSet::SyncModelValues(int r) {
  if (!mirrored()) return;
  contexts_[r]->MakeCurrent();
  std::vector<Variable>& device = models_[r]->variables();
  for (size_t v = 0; v < device.size(); ++v) contexts_[r]->Convert(mirrors_[r][v].value, device[v].value);
}

void ReplicaSet::InitializeVariables(uint64_t seed) {
  contexts_[0]->MakeCurrent();
  models_[0]->InitializeVariables(seed);
  if (!mirrored()) return;
  std::vector<Variable>& device = models_[0]->variables();
  for (size_t v = 0; v < device.size(); ++v) contexts_[0]->Convert(device[v].value, mirrors_[0][v].value);
}

void ReplicaSet::BroadcastValues(int from) {
  // Over an emulated interconnect the next step's uploads stand for the
  // copies (emulated replicas compute nothing from their values).
  if (interconnect_) return;
  // Host tensors (CPU replicas or host mirrors): the strategies that keep
  // variables on GPUs broadcast with NCCL instead.
  std::vector<Variable>& source = variables(from);
  for (int r = 0; r < size(); ++r) {
    if (r == from) continue;
    std::vector<Variable>& target = variables(r);
    for (size_t v = 0; v < source.size(); ++v) target[v].value.CopyFrom(source[v].value);
  }
}

}  // namespace pstrain
