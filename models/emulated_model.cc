#include "models/emulated_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/time/clock.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// Sleeps until `deadline` (at once when it has passed).
void SleepUntil(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left > absl::ZeroDuration()) absl::SleepFor(left);
}

// 1/byte_scale of `real`'s elements, rounded up: at least one.
int64_t ScaledElements(const Variable& real, double byte_scale) {
  return std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(static_cast<double>(real.value.num_elements()) / byte_scale)));
}

}  // namespace

EmulatedModel::EmulatedModel(std::unique_ptr<Model> real, EmulatedCompute compute, double byte_scale)
    : real_(std::move(real)), compute_(compute), layers_(real_->LayerCosts()) {
  CHECK_GE(byte_scale, 1) << "byte scale";
  for (Variable& v : real_->variables()) {
    CHECK(v.grad.on_host()) << "an emulated model wraps a CPU model";
    if (byte_scale == 1) std::memset(v.grad.raw(), 0, v.grad.num_bytes());  // these are the ones exchanged
  }
  if (byte_scale == 1) return;
  // The real variables are never exchanged from here on, so never touched:
  // their large buffers cost no memory (Buffer::Allocate's fresh pages).
  scaled_.emplace();
  for (const Variable& v : real_->variables()) {
    const int64_t n = ScaledElements(v, byte_scale);
    scaled_->push_back(Variable{.name = v.name, .value = Tensor(Shape{n}), .grad = Tensor(Shape{n})});  // zeros
  }
  InitializeVariables(0);  // never left uninitialised, as the real ones
}

void EmulatedModel::InitializeVariables(uint64_t seed) {
  if (!scaled_) {
    real_->InitializeVariables(seed);
    return;
  }
  // Only the kept share is drawn: the real variables are never exchanged,
  // and drawing all of them cost every worker of a byte-scaled matrix row
  // seconds of CPU at start-up (b times what it keeps).
  std::vector<absl::Span<float>> prefixes;
  for (Variable& v : *scaled_) prefixes.emplace_back(v.value.data(), v.value.num_elements());
  real_->InitializeVariablePrefixes(seed, prefixes);
}

void EmulatedModel::InitializeVariablePrefixes(uint64_t seed, const std::vector<absl::Span<float>>& prefixes) {
  real_->InitializeVariablePrefixes(seed, prefixes);  // a prefix of a scaled variable is one of the real one
}

std::vector<absl::Duration> EmulatedModel::BackwardSchedule() const {
  int64_t total = 0;
  for (const LayerCost& layer : layers_) total += layer.forward_flops_per_example;
  std::vector<absl::Duration> schedule;
  int64_t done = 0;
  for (auto layer = layers_.rbegin(); layer != layers_.rend(); ++layer) {
    done += layer->forward_flops_per_example;
    // Without FLOP counts, equal shares.
    const double share =
        total > 0 ? static_cast<double>(done) / total : static_cast<double>(schedule.size() + 1) / layers_.size();
    schedule.push_back(compute_.backward * share);
  }
  return schedule;
}

absl::Time EmulatedModel::Forward() {
  const absl::Time start = absl::Now();
  if (!variable_wait_) {
    SleepUntil(start + compute_.forward);
    return start + compute_.forward;
  }
  int64_t total = 0;
  for (const LayerCost& layer : layers_) total += layer.forward_flops_per_example;
  // Layer i ends `its share` after the later of the previous layer's end
  // and its variables' arrival (a wait that outlasts the layers before it
  // delays the rest); waits return at once for what has arrived, so they
  // are asked ahead of the modelled clock.
  absl::Time end = start;
  for (const LayerCost& layer : layers_) {
    for (int v : layer.variables) variable_wait_(v);
    end = std::max(end, absl::Now());
    const double share = total > 0 ? static_cast<double>(layer.forward_flops_per_example) / total
                                   : 1.0 / static_cast<double>(layers_.size());
    end += compute_.forward * share;
  }
  SleepUntil(end);
  return end;
}

float EmulatedModel::TrainStep(const Tensor& images, const int32_t* labels, const GradientReadyHook& hook) {
  if (compute_delay_) compute_delay_();  // owed before this step: not this step's
  const absl::Time backward_start = Forward();
  const std::vector<absl::Duration> schedule = BackwardSchedule();
  absl::Duration delayed;  // compute lost to other work on the device so far
  auto delay = [&] { return compute_delay_ ? delayed += compute_delay_() : delayed; };
  for (size_t i = 0; i < schedule.size(); ++i) {
    const LayerCost& layer = layers_[layers_.size() - 1 - i];
    if (layer.variables.empty()) continue;  // nothing to release: its time counts towards the next
    SleepUntil(backward_start + schedule[i] + delay());
    if (!hook) continue;
    for (auto v = layer.variables.rbegin(); v != layer.variables.rend(); ++v) hook(*v);
  }
  SleepUntil(backward_start + compute_.backward + delay());
  return std::log(static_cast<float>(num_classes()));
}

EvalResult EmulatedModel::Evaluate(const Tensor& images, const int32_t* labels) {
  EvalResult result;
  result.examples = images.dim(0);
  result.mean_loss = std::log(static_cast<float>(num_classes()));
  return result;
}

}  // namespace pstrain
