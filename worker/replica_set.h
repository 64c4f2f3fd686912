// ReplicaSet: the model replicas of one worker process (devices_per_worker).
//
// Each replica has its own DeviceContext (on CPU: its own oneDNN stream; on
// GPU: its own GPU, stream and handles) and runs on its own thread (with an
// equal share of the process's OpenMP threads on CPU), so replicas compute
// concurrently. Replica r of worker w reads the (w * N + r)-th slice of each
// global batch; on GPU it runs on GPU (w * N + r) mod (GPUs on the machine),
// so several worker processes on one machine spread over its GPUs (and share
// them when there are fewer GPUs than replicas; NCCL allows that).
//
// Host mirrors. Strategies that work on the host (parameter servers, host
// reductions, Gloo) read and write variables(r): for a CPU replica those are
// the model's own variables; for a GPU replica with host mirrors they are
// pinned host copies, and TrainStep() moves data across: it uploads the
// values before the step and downloads each gradient as backward finalises
// it (before the strategy's hook for that variable runs). Strategies that
// work on the device (NCCL) ask for no mirrors and use device_variables(r).
//
// Mirrors' copies go through each replica's CopyEngine (device/
// copy_engine.h): gradients are downloaded on copy streams while backward
// goes on, each reaching the strategy's hook once in host memory (on the
// engine's completion thread). With UploadValuesOnWait (the parameter-server
// pipeline), values are not uploaded before the step: the forward's
// VariableWait uploads each one as its pull lands (UploadValue), and the
// layer reading it waits for that copy only.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "device/copy_engine.h"
#include "device/topology/emulated_interconnect.h"
#include "models/model.h"
#include "worker/timeline.h"

namespace pstrain {

struct ReplicaOptions {
  DeviceKind device_kind = DeviceKind::kCpu;
  // This worker's index: picks the GPUs (see above).
  int worker_index = 0;
  // GPU replicas: keep pinned host mirrors of the variables (see above).
  bool host_mirrors = true;
  // With host mirrors: TrainStep() downloads every gradient. Off when the
  // strategy reduces on the devices first and downloads the result itself
  // (local_parameter_device gpu); TrainStep() then only waits for backward.
  bool download_gradients = true;
  // The compute-bound layers' arithmetic (DeviceContext::SetPrecision).
  Precision precision = Precision::kFp32;
  // How float32 products run where the device has TF32
  // (DeviceContext::SetFp32Math).
  Fp32Math fp32_math = Fp32Math::kStrict;
  // With loss scaling (SetLossScale): a gradient that is not finite once
  // unscaled is replaced by zeros before the strategy sees it (parameter
  // servers apply what they are sent and must never be sent such a value);
  // otherwise it is left as it is, for the strategy's optimizer to skip the
  // step (LocalOptimizer).
  bool zero_non_finite_gradients = false;
  // When set, applied to every replica's model once built, with the
  // replica's index (device emulated: an EmulatedModel around it,
  // worker/emulated_device.h).
  std::function<absl::StatusOr<std::unique_ptr<Model>>(std::unique_ptr<Model>, int replica)> wrap_model;
  // Emulated devices inside an emulated host (emulation.topology): replica r
  // is device r of it. TrainStep() then charges it the copies a GPU replica
  // would make (uploads with host_mirrors, downloads with
  // download_gradients too), BroadcastValues() copies nothing (the uploads
  // stand for it), and the strategies' reductions charge theirs
  // (local_reduce.h).
  std::shared_ptr<EmulatedInterconnect> interconnect;
  // Each mirrored replica's copy engine, made from its context; null: the
  // context's own (DeviceContext::NewCopyEngine). Set, it gives CPU replicas
  // host mirrors too: a CPU replica then stands for a device with memory of
  // its own (the GPU replica path, tested and emulated without a GPU).
  std::function<std::unique_ptr<CopyEngine>(DeviceContext& context)> copy_engine;
};

class ReplicaSet {
 public:
  static absl::StatusOr<std::unique_ptr<ReplicaSet>> Create(const ModelConfig& config, int replicas,
                                                            const ReplicaOptions& options = {});
  ~ReplicaSet();

  int size() const { return static_cast<int>(models_.size()); }
  Model& model(int r) { return *models_[r]; }
  DeviceContext& context(int r) { return *contexts_[r]; }
  // The variables strategies exchange on the host (see above).
  std::vector<Variable>& variables(int r) { return mirrored() ? mirrors_[r] : models_[r]->variables(); }
  // The model's own variables (device tensors on a GPU).
  std::vector<Variable>& device_variables(int r) { return models_[r]->variables(); }
  // GPU replicas with host mirrors.
  bool mirrored() const { return !mirrors_.empty(); }
  // TrainStep() leaves every gradient in variables(r) (CPU replicas, or
  // mirrors with ReplicaOptions::download_gradients).
  bool downloads_gradients() const {
    return interconnect_ ? host_mirrors_ && download_gradients_ : !mirrored() || download_gradients_;
  }
  // The emulated host's interconnect (ReplicaOptions::interconnect), or null.
  EmulatedInterconnect* interconnect() const { return interconnect_.get(); }

  // Runs fn(r) for every replica concurrently and waits for all. With one
  // replica it runs inline on the caller's thread. The replica's device is
  // current on the thread running fn(r).
  void ForEach(const std::function<void(int replica)>& fn);

  // One training step of replica r (call from ForEach's fn(r)): with host
  // mirrors, uploads variables(r)'s values first and downloads every gradient
  // into variables(r) (each before `hook` sees it; unless
  // download_gradients is off: then the step ends with backward finished on
  // the device). Returns the mean loss.
  float TrainStep(int r, const Tensor& images, const int32_t* labels, const GradientReadyHook& hook);

  // Loss scaling (optim/loss_scaler.h): from the next TrainStep() on, every
  // replica's backward runs on `scale` times the loss. With the gradients on
  // the host (downloads_gradients()), TrainStep() divides each gradient in
  // variables(r) by `scale` as it arrives there (before `hook` sees it),
  // noting whether all were then finite. Without, the gradients stay scaled
  // on the devices: the strategy unscales them there and reports overflows
  // through MarkGradientsNotFinite (StrategyNeeds::unscales_on_device).
  void SetLossScale(float scale);
  // The scale set by SetLossScale; 0 without loss scaling.
  float loss_scale() const { return loss_scale_; }
  // With loss scaling: whether every gradient of replica r's last
  // TrainStep() was finite once unscaled (always true without).
  bool gradients_finite(int r) const { return gradients_finite_[r]; }
  // A strategy that unscales on the devices found a gradient of replica r's
  // last step not finite (until its next TrainStep()).
  void MarkGradientsNotFinite(int r) { gradients_finite_[r] = false; }

  // From the next TrainStep() on (with host mirrors), values are uploaded one
  // by one by the model's VariableWait calling UploadValue, not all before
  // the step. Call before the first TrainStep(), from the training thread.
  void UploadValuesOnWait() { upload_on_wait_ = mirrored(); }
  bool uploads_values_on_wait() const { return upload_on_wait_; }
  // Queues the upload of variables(r)[variable]'s value into the model's
  // (call from replica r's thread, inside its forward): compute queued after
  // it reads the new value.
  void UploadValue(int r, int variable);

  // With host mirrors: each gradient download goes to `timeline`'s lane
  // "download <r>" (from the hook that finalised it to its bytes in host
  // memory) and each upload by UploadValue to "upload <r>" (the call: on a
  // GPU the queueing only, the stream waits, not the host). Null: none.
  void SetTimeline(Timeline* timeline) { timeline_ = timeline; }

  // Initialises replica 0's variables from `seed` (its host mirrors too).
  void InitializeVariables(uint64_t seed);
  // Copies replica `from`'s variable values into every other replica's
  // variables(r): host tensors only (CPU replicas or host mirrors; Tensor::
  // CopyFrom checks), as the NCCL strategies broadcast on the devices.
  void BroadcastValues(int from);
  // Makes replica r's model read variables(r)'s values (upload from the host
  // mirrors; nothing without mirrors). E.g. before evaluating the final
  // parameters a strategy left in the mirrors.
  void SyncModelValues(int r);

 private:
  ReplicaSet() = default;
  // Queues the download of replica r's gradient of `variable` into its
  // mirror; `done` (may be null) runs once it is there.
  void DownloadGradient(int r, int variable, std::function<void()> done);
  // The copy of `variable` of replica r from `start` until now on the
  // timeline's lane `lane` + r (see SetTimeline).
  void RecordCopy(absl::string_view lane, int r, int variable, absl::Time start);
  // TrainStep() over an emulated interconnect (ReplicaOptions).
  float TrainStepOverInterconnect(int r, const Tensor& images, const int32_t* labels, const GradientReadyHook& hook);
  // TrainStep() without loss scaling.
  float TrainStepWithHostGradients(int r, const Tensor& images, const int32_t* labels, const GradientReadyHook& hook);
  // Whether TrainStep(r) leaves the gradients in host memory, where they are
  // unscaled (CPU replicas, or host mirrors that download them); GPU
  // replicas without mirrors keep them on the device.
  bool GradientsOnHost(int r) {
    return downloads_gradients() && (variables(r).empty() || variables(r)[0].grad.on_host());
  }
  // Unscales variables(r)[variable].grad (see SetLossScale).
  void UnscaleGradient(int r, int variable);
  std::vector<std::unique_ptr<DeviceContext>> contexts_;
  std::vector<std::unique_ptr<Model>> models_;
  std::vector<std::vector<Variable>> mirrors_;        // [replica][variable], pinned host; empty when not mirrored
  std::vector<std::unique_ptr<CopyEngine>> engines_;  // [replica], with mirrors
  bool upload_on_wait_ = false;
  Timeline* timeline_ = nullptr;
  int threads_per_replica_ = 1;
  std::shared_ptr<EmulatedInterconnect> interconnect_;
  bool host_mirrors_ = true;
  bool download_gradients_ = true;
  bool zero_non_finite_gradients_ = false;
  float loss_scale_ = 0;                // 0: no loss scaling
  std::vector<char> gradients_finite_;  // [replica], of the last TrainStep
};

}  // namespace pstrain
