// EmulatedModel: a model that takes the time a device would take and does
// no math (`device: emulated`, docs/EMULATION.md).
//
// It wraps a real model of the zoo built on the CPU, so its variables have
// the real names, shapes and byte counts, and every strategy exchanges them
// for real. TrainStep sleeps for the modelled forward pass, then walks the
// layers backward and, at the moment the modelled backward pass would finish
// each layer (its share of the backward time is its share of the model's
// forward FLOPs), calls the gradient-ready hook for that layer's variables,
// so fusion and overlap behave as on the device. Gradients stay zero and the
// loss is ln(classes) (what a model that has learnt nothing scores): the
// numbers an emulated run reports are rates, never accuracies.
//
// Sleeps are taken against deadlines counted from the step's start, so
// scheduling delays do not accumulate over the layers.
//
// With a byte scale b > 1 (--byte_scale: common/config/byte_scale.h) its
// variables are its own: the real ones' names, in the same order, each a
// flat tensor of 1/b of the real one's elements (rounded up), holding the
// first of the real values.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "models/model.h"

namespace pstrain {

// The modelled compute of one training step on one device.
struct EmulatedCompute {
  absl::Duration forward;
  absl::Duration backward;
};

class EmulatedModel final : public Model {
 public:
  // `real` provides the variables (scaled by `byte_scale` >= 1) and layer
  // costs (its own compute is never run); the gradients variables() shows
  // are zeroed here.
  EmulatedModel(std::unique_ptr<Model> real, EmulatedCompute compute, double byte_scale = 1);

  const std::string& name() const override { return real_->name(); }
  const Shape& input_shape() const override { return real_->input_shape(); }
  int num_classes() const override { return real_->num_classes(); }
  std::vector<Variable>& variables() override { return scaled_ ? *scaled_ : real_->variables(); }
  // With a byte scale, draws only the kept first values of each variable.
  void InitializeVariables(uint64_t seed) override;
  void InitializeVariablePrefixes(uint64_t seed, const std::vector<absl::Span<float>>& prefixes) override;
  void SetLossScale(float scale) override { real_->SetLossScale(scale); }
  // Forward then takes each layer's share of the modelled forward time from
  // the later of the previous layer's end and its variables' arrival.
  void SetVariableWait(VariableWait wait) override { variable_wait_ = std::move(wait); }
  // Compute a device loses to other work on it (a collective kernel,
  // emulation.topology): called before each of backward's waits, it returns
  // the time owed since its last call, which pushes the rest of backward
  // later. Its first call in a step only clears what was owed before.
  void SetComputeDelay(std::function<absl::Duration()> take) { compute_delay_ = std::move(take); }
  // Sleeps through the modelled step, calling `hook` as described above.
  float TrainStep(const Tensor& images, const int32_t* labels, const GradientReadyHook& hook) override;
  // Models no inference: every example counted, none correct, loss
  // ln(classes). Emulated runs do not evaluate (the trainer skips it).
  EvalResult Evaluate(const Tensor& images, const int32_t* labels) override;
  // Models no input gradient either (KeepInputGradient: Unimplemented).
  const Tensor& InputGradient() const override { return no_gradient_; }
  std::vector<std::pair<std::string, Shape>> LayerShapes() const override { return real_->LayerShapes(); }
  int64_t ForwardFlopsPerExample() const override { return real_->ForwardFlopsPerExample(); }
  std::vector<LayerCost> LayerCosts() const override { return layers_; }

  // When, after backward starts, each layer's gradients are final, in
  // backward order (for tests): the cumulative FLOP shares of `backward`.
  std::vector<absl::Duration> BackwardSchedule() const;

 private:
  // Sleeps through the modelled forward; returns when it ends.
  absl::Time Forward();

  std::unique_ptr<Model> real_;
  std::optional<std::vector<Variable>> scaled_;  // byte scale > 1: the variables exchanged
  const EmulatedCompute compute_;
  VariableWait variable_wait_;
  std::function<absl::Duration()> compute_delay_;
  const std::vector<LayerCost> layers_;
  const Tensor no_gradient_;
};

}  // namespace pstrain
