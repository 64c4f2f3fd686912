#include "worker/ps_pipeline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/config/config_checks.h"
#include "common/status_macros.h"
#include "worker/strategy.h"

namespace pstrain {

PsPipeline::PsPipeline(PsClient* client, ReplicaSet* replicas, const ExperimentConfig& config, Timeline* timeline)
    : client_(client),
      replicas_(replicas),
      timeline_(timeline),
      sync_(config.consistency() == "sync"),
      pull_timeout_(absl::Seconds(config.timeouts().sync_step_seconds())),
      num_replicas_(replicas->size()) {
  const int num_variables = static_cast<int>(replicas->variables(0).size());
  absl::MutexLock lock(&mu_);
  window_bytes_ = config.ps_scheduling().window_bytes();
  pushes_per_shard_ = config.ps_scheduling().pushes_per_shard();
  TakeBatches(0);
  final_replicas_.assign(num_variables, 0);
  reduced_.assign(num_variables, false);
  missing_.assign(num_variables, 0);
  value_serial_.assign(num_variables, 0);
  copied_serial_.assign(num_replicas_, std::vector<int64_t>(num_variables, 0));
}

void PsPipeline::TakeBatches(int64_t version) {
  const int num_variables = static_cast<int>(replicas_->variables(0).size());
  batch_variables_.clear();
  batch_bytes_.clear();
  batch_priority_.clear();
  batch_shard_.clear();
  variable_batches_.assign(num_variables, {});
  for (int b = 0; b < client_->num_push_batches(); ++b) {
    PsClient::BatchInfo info = client_->Batch(b);
    batch_bytes_.push_back(info.bytes);
    batch_shard_.push_back(info.shard);
    batch_variables_.push_back(std::move(info.variables));
    batch_priority_.push_back(*std::min_element(batch_variables_[b].begin(), batch_variables_[b].end()));
    for (int v : batch_variables_[b]) variable_batches_[v].push_back(b);
  }
  unreduced_in_batch_.assign(batch_variables_.size(), 0);
  batch_version_.assign(batch_variables_.size(), version);
  admission_.Configure(window_bytes_, pushes_per_shard_, client_->num_shards(), client_->ColocatedShards());
}

void PsPipeline::Relayout(const TransferLayout& layout, int64_t version) {
  absl::MutexLock lock(&mu_);
  client_->Rebatch(layout.batch_bytes);
  window_bytes_ = layout.window_bytes;
  pushes_per_shard_ = layout.pushes_per_shard;
  TakeBatches(version);
}

void PsPipeline::ValuesInPlace(int64_t version) {
  absl::MutexLock lock(&mu_);
  std::fill(batch_version_.begin(), batch_version_.end(), version);
  std::fill(missing_.begin(), missing_.end(), 0);
  pulls_in_flight_ = 0;
  failure_ = absl::OkStatus();
  // Every replica holds the joined values already (the strategy broadcast them).
  for (auto& copied : copied_serial_) copied = value_serial_;
}

void PsPipeline::BeginStep(int64_t step) {
  absl::MutexLock lock(&mu_);
  step_ = step;
  std::fill(final_replicas_.begin(), final_replicas_.end(), 0);
  std::fill(reduced_.begin(), reduced_.end(), false);
  for (size_t b = 0; b < batch_variables_.size(); ++b) {
    unreduced_in_batch_[b] = static_cast<int>(batch_variables_[b].size());
  }
  queue_.clear();
  acknowledged_ = 0;
  dropped_ = 0;
}

GradientReadyHook PsPipeline::HookFor(int replica) {
  return [this, replica](int variable) { OnGradientFinal(replica, variable); };
}

VariableWait PsPipeline::WaitFor(int replica) {
  return [this, replica](int variable) { WaitForVariable(replica, variable); };
}

void PsPipeline::OnGradientFinal(int replica, int variable) {
  {
    absl::MutexLock lock(&mu_);
    if (++final_replicas_[variable] < num_replicas_) return;
  }
  // The last replica to finish the variable forms the mean; no other thread
  // touches its gradients until the next step.
  MeanIntoReplicaZero(variable);
  std::vector<Send> sends;
  {
    absl::MutexLock lock(&mu_);
    MarkReduced(variable, &sends);
    Pump(&sends);
  }
  SendPushes(sends);
}

void PsPipeline::MeanIntoReplicaZero(int variable) {
  if (num_replicas_ == 1) return;
  Tensor& sum = replicas_->variables(0)[variable].grad;
  float* s = sum.data();
  const int64_t n = sum.num_elements();
  for (int r = 1; r < num_replicas_; ++r) {
    const float* g = replicas_->variables(r)[variable].grad.data();
    for (int64_t i = 0; i < n; ++i) s[i] += g[i];
  }
  const float scale = 1.0f / static_cast<float>(num_replicas_);
  for (int64_t i = 0; i < n; ++i) s[i] *= scale;
}

void PsPipeline::MarkReduced(int variable, std::vector<Send>* sends) {
  reduced_[variable] = true;
  for (int b : variable_batches_[variable]) {
    if (--unreduced_in_batch_[b] == 0) queue_.emplace(batch_priority_[b], b);
  }
}

void PsPipeline::Pump(std::vector<Send>* sends) {
  for (auto it = queue_.begin(); it != queue_.end() && failure_.ok() && !admission_.Saturated();) {
    const int b = it->second;
    const PushAdmission::Verdict verdict = admission_.Admit(batch_bytes_[b], batch_shard_[b]);
    if (verdict == PushAdmission::Verdict::kWindowFull) return;
    if (verdict == PushAdmission::Verdict::kShardBusy) {
      ++it;  // the next in priority to another shard may go
      continue;
    }
    it = queue_.erase(it);
    sends->push_back({b, batch_version_[b], epoch_, step_});
  }
}

void PsPipeline::SendPushes(const std::vector<Send>& sends) {
  for (const Send& send : sends) {
    {
      // The step was abandoned since these pushes were chosen (an
      // acknowledgement's completion chose them while the step failed
      // elsewhere): its gradients must not reach the shards recovered since.
      absl::MutexLock lock(&mu_);
      if (send.epoch != epoch_) return;
      ++sending_;
    }
    const absl::Time sent = absl::Now();
    client_->PushBatchAsync(send.batch, send.version, send.step,
                            [this, epoch = send.epoch, b = send.batch, sent](absl::Status status, int dropped) {
                              OnPushed(epoch, b, sent, std::move(status), dropped);
                            });
    absl::MutexLock lock(&mu_);
    --sending_;
  }
}

void PsPipeline::OnPushed(int64_t epoch, int batch, absl::Time sent, absl::Status status, int dropped) {
  const absl::Time acknowledged = absl::Now();
  std::vector<Send> sends;
  int64_t min_version = 0;
  {
    absl::MutexLock lock(&mu_);
    if (epoch != epoch_) return;
    if (timeline_ != nullptr) {
      timeline_->Record(absl::StrCat("push batch ", batch), "push", sent, acknowledged,
                        absl::StrCat(R"("bytes": )", batch_bytes_[batch], R"(, "shard": )", batch_shard_[batch],
                                     R"(, "ok": )", status.ok() ? "true" : "false"));
    }
    admission_.Done(batch_bytes_[batch], batch_shard_[batch]);
    ++acknowledged_;
    if (!status.ok()) {
      Fail(status);
      return;
    }
    dropped_ += dropped;
    // The batch's next value: the shard's once this step is applied (sync),
    // or whatever it holds now (async).
    min_version = sync_ ? batch_version_[batch] + 1 : 0;
    for (int v : batch_variables_[batch]) ++missing_[v];
    ++pulls_in_flight_;
    Pump(&sends);
  }
  StartPull(epoch, batch, min_version);
  SendPushes(sends);
}

void PsPipeline::StartPull(int64_t epoch, int batch, int64_t min_version) {
  int64_t step;
  {
    absl::MutexLock lock(&mu_);
    step = step_;
  }
  const absl::Time sent = absl::Now();
  client_->PullBatchAsync(batch, min_version, pull_timeout_, step + 1,
                          [this, epoch, batch, sent](absl::Status status, IncomingFrame response) {
                            OnPulled(epoch, batch, sent, std::move(status), std::move(response));
                          });
}

void PsPipeline::OnPulled(int64_t epoch, int batch, absl::Time sent, absl::Status status, IncomingFrame response) {
  int64_t bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    if (epoch != epoch_) return;
    bytes = batch_bytes_[batch];
    if (!status.ok()) {
      --pulls_in_flight_;
      Fail(status);
      return;
    }
    ++reading_;
  }
  // Replica 0's values of this batch are read by nobody until they have
  // landed (the next forward waits for them).
  absl::StatusOr<int64_t> version = client_->ReadBatchPull(batch, response);
  if (timeline_ != nullptr) {
    timeline_->Record(absl::StrCat("pull batch ", batch), "pull", sent, absl::Now(),
                      absl::StrCat(R"("bytes": )", bytes));
  }
  absl::MutexLock lock(&mu_);
  --reading_;
  --pulls_in_flight_;
  if (!version.ok()) {
    Fail(version.status());
    return;
  }
  batch_version_[batch] = *version;
  for (int v : batch_variables_[batch]) {
    --missing_[v];
    ++value_serial_[v];
  }
}

void PsPipeline::Fail(const absl::Status& status) {
  if (failure_.ok()) failure_ = status;
}

void PsPipeline::WaitForVariable(int replica, int variable) {
  bool copy = false;
  {
    absl::MutexLock lock(&mu_);
    if (missing_[variable] > 0 && failure_.ok()) {
      const absl::Time start = absl::Now();
      struct Wait {
        PsPipeline* pipeline;
        int variable;
      } wait{this, variable};
      mu_.Await(absl::Condition(
          +[](Wait* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return w->pipeline->missing_[w->variable] == 0 || !w->pipeline->failure_.ok();
          },
          &wait));
      wait_time_ += absl::Now() - start;
    }
    if (replica > 0 && copied_serial_[replica][variable] != value_serial_[variable] && failure_.ok()) {
      copied_serial_[replica][variable] = value_serial_[variable];
      copy = true;
    }
  }
  // Replica 0's value stays as it is until this replica's gradient of it is
  // final (its next pull starts after that).
  if (copy) replicas_->variables(replica)[variable].value.CopyFrom(replicas_->variables(0)[variable].value);
  // A GPU replica's layer reads the device's copy: uploaded now, on the copy
  // stream, and the layer's compute waits for that copy alone.
  if (replicas_->uploads_values_on_wait()) replicas_->UploadValue(replica, variable);
}

absl::StatusOr<int> PsPipeline::FinishStep() {
  std::vector<int> left;
  {
    absl::MutexLock lock(&mu_);
    for (size_t v = 0; v < reduced_.size(); ++v) {
      if (final_replicas_[v] < num_replicas_) left.push_back(static_cast<int>(v));
      final_replicas_[v] = num_replicas_;
    }
  }
  // Variables no hook reported (a model that finalises without calling it).
  std::vector<Send> sends;
  for (int v : left) MeanIntoReplicaZero(v);
  {
    absl::MutexLock lock(&mu_);
    for (int v : left) MarkReduced(v, &sends);
    Pump(&sends);
  }
  SendPushes(sends);
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](PsPipeline* p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return p->acknowledged_ == static_cast<int>(p->batch_variables_.size()) || !p->failure_.ok();
      },
      this));
  if (!failure_.ok()) return failure_;
  return dropped_;
}

absl::StatusOr<int64_t> PsPipeline::WaitForPulls() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](PsPipeline* p) ABSL_NO_THREAD_SAFETY_ANALYSIS { return p->pulls_in_flight_ == 0 || !p->failure_.ok(); },
      this));
  if (!failure_.ok()) return failure_;
  return *std::min_element(batch_version_.begin(), batch_version_.end());
}

void PsPipeline::Abandon() {
  absl::MutexLock lock(&mu_);
  ++epoch_;
  admission_.Clear();
  queue_.clear();
  mu_.Await(absl::Condition(
      +[](PsPipeline* p) ABSL_NO_THREAD_SAFETY_ANALYSIS { return p->reading_ == 0 && p->sending_ == 0; }, this));
}

absl::Duration PsPipeline::wait_time() const {
  absl::MutexLock lock(&mu_);
  return wait_time_;
}

namespace {

// Why the pipeline cannot run `c`'s traffic ("" when it can), as the config
// check says it: what was expected, and what the config has.
std::pair<std::string, std::string> PipelineRefusal(const ExperimentConfig& c) {
  const absl::StatusOr<StrategyNeeds> needs = NeedsOf(c);
  if (needs.ok() && !needs->parameter_servers) {
    return {"false with a variable_update without parameter servers",
            absl::StrCat("true with variable_update ", c.variable_update())};
  }
  if (c.consistency() != "sync" && c.consistency() != "async") {
    return {"consistency sync or async (ssp holds pulls back by step)", absl::StrCat("consistency ", c.consistency())};
  }
  return {};
}

// ps_scheduling: the pipeline schedules parameter-server traffic of sync or
// async runs (on GPU replicas through their host mirrors); asked for
// anywhere else, it is refused.
const bool kConfigCheck =
    ConfigCheckRegistry().Register("ps_scheduling", [](const ExperimentConfig& c, const ConfigChecker& ck) {
      const PsSchedulingConfig& s = c.ps_scheduling();
      PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("ps_scheduling.window_bytes", s.window_bytes()));
      PSTRAIN_RETURN_IF_ERROR(ck.Positive("ps_scheduling.batch_bytes", s.batch_bytes()));
      PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("ps_scheduling.pushes_per_shard", s.pushes_per_shard()));
      if (s.tune() && !PipelineOn(c)) {
        return ck.Fail("ps_scheduling.tune", "false without the pipeline (it tunes the pipeline's batches and window)",
                       "true");
      }
      if (!s.pipeline()) return absl::OkStatus();
      const auto [expected, got] = PipelineRefusal(c);
      return expected.empty() ? absl::OkStatus() : ck.Fail("ps_scheduling.pipeline", expected, got);
    });

}  // namespace

bool PipelineOn(const ExperimentConfig& config) {
  if (config.ps_scheduling().has_pipeline()) return config.ps_scheduling().pipeline();
  // GPU replicas: on when asked for, until measured on a GPU.
  return PipelineRefusal(config).first.empty() && config.device() != "gpu";
}

}  // namespace pstrain
