// Model: a graph of layers ending in a softmax cross-entropy loss.
//
// The zoo builds models from LayerSpecs through ModelBuilder. A model exposes
// its variables in a fixed order (construction order of layers, then each
// layer's parameters), named "<layer>/<param>". TrainStep runs forward and
// backward and calls the gradient-ready hook for each variable as soon as its
// gradient is final, in backward order, so communication can overlap backward.
#pragma once

#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/registry.h"
#include "models/layers/layer.h"
#include "proto/config.pb.h"

namespace pstrain {

// On a GPU model, value and grad are device tensors (Tensor::on_host() is
// false); they are read and written through the model's DeviceContext.
// The gradients of a model's variables are views into one contiguous buffer
// in variable order: consecutive variables' gradients are adjacent.
struct Variable {
  std::string name;
  Tensor value;  // the model's working copy (what forward reads)
  Tensor grad;   // written by TrainStep
};

struct EvalResult {
  float mean_loss = 0;
  int64_t correct = 0;
  int64_t examples = 0;
  // Two-class models only (click models): logit[1] - logit[0] per example,
  // in batch order; p(class 1) = sigmoid(margin). What AUC and log loss are
  // computed from (common/data/criteo/auc.h). Empty otherwise.
  std::vector<float> margins;
  // Over a whole test set of a two-class model (worker/run/evaluation.h):
  // the ROC AUC of the margins and the mean log loss of p(class 1); NaN
  // otherwise.
  double auc = std::numeric_limits<double>::quiet_NaN();
  double log_loss = std::numeric_limits<double>::quiet_NaN();
};

// One layer of a model: its cost and the variables it owns.
struct LayerCost {
  std::string name;
  int64_t forward_flops_per_example = 0;  // Layer::ForwardFlopsPerExample()
  std::vector<int> variables;             // indices into Model::variables(), ascending
};

// A step's activations, gradients and gradient scratch as the model's
// memory planner placed them (models/memory_plan.h); all zero for a model
// without a plan. Parameters and their gradients are not included.
struct StepMemory {
  int64_t arena_bytes = 0;      // what the step holds
  int64_t separate_bytes = 0;   // what it would hold with a buffer each, alive all step
  int64_t live_peak_bytes = 0;  // the most bytes alive at one time: no placement holds less
  int buffers = 0;
};

// Called with the index of a variable whose gradient is final. On a CPU
// model the gradient can be read at once; on a GPU model it is final in the
// order of the model's stream: work queued on that stream sees it, host code
// must synchronise the stream first.
using GradientReadyHook = std::function<void(int variable_index)>;

// Called by TrainStep's forward with the index of each variable a layer
// reads, before that layer runs, in forward order; returns once the
// variable's value for this step is in place (a parameter server's pull
// landing layer by layer: ps_scheduling.pipeline). Every variable is waited
// for once per TrainStep.
using VariableWait = std::function<void(int variable_index)>;

class Model {
 public:
  virtual ~Model() = default;
  virtual const std::string& name() const = 0;
  // Per-example input shape [C, H, W] and number of classes.
  virtual const Shape& input_shape() const = 0;
  virtual int num_classes() const = 0;
  virtual std::vector<Variable>& variables() = 0;
  int64_t num_parameters();

  // Fills every variable from its initializer; same seed, same values.
  virtual void InitializeVariables(uint64_t seed) = 0;
  // Fills prefixes[i] (host memory, at most variable i's elements, one span
  // per variable) with the first prefixes[i].size() values InitializeVariables
  // (seed) would give variable i, drawing only those: an emulated model with
  // a byte scale keeps 1/b of each variable. The model's own variables are
  // left as they are.
  virtual void InitializeVariablePrefixes(uint64_t seed, const std::vector<absl::Span<float>>& prefixes) = 0;
  // Forward and backward on images [N, C, H, W] (host tensors, or tensors on
  // the model's device); labels are on the host. Returns the mean loss.
  virtual float TrainStep(const Tensor& images, const int32_t* labels, const GradientReadyHook& hook) = 0;
  // Later TrainSteps call `wait` as VariableWait says (null: they never
  // wait). Evaluate never waits.
  virtual void SetVariableWait(VariableWait wait) = 0;
  // TrainStep's gradients become `scale` times the mean loss's (its returned
  // loss is unscaled): the loss scale of mixed precision
  // (optim/loss_scaler.h). 1 until set.
  virtual void SetLossScale(float scale) = 0;
  // Forward only (inference mode).
  virtual EvalResult Evaluate(const Tensor& images, const int32_t* labels) = 0;
  // Later TrainSteps also compute d(loss)/d(images) (off by default: no
  // layer's input gradient is computed for the images). Sparse models read
  // the gradient of their pooled embeddings there (worker/sparse_stage.h).
  // FailedPrecondition when a layer that passes its gradient through (e.g.
  // flatten) reads the images directly: slice or dense them instead.
  virtual absl::Status KeepInputGradient() { return absl::UnimplementedError("no input gradient"); }
  // After a TrainStep with KeepInputGradient: d(loss)/d(images) times the
  // loss scale, the images' shape, plain, on the model's device (read it
  // after synchronising the device's work).
  virtual const Tensor& InputGradient() const = 0;
  // Per-example output shape of every layer, in construction order, with names.
  virtual std::vector<std::pair<std::string, Shape>> LayerShapes() const = 0;
  // Sum of the layers' Layer::ForwardFlopsPerExample() (multiply-add = 2
  // FLOPs; conv, dense and dot_interaction layers only). Training step ~ 3x
  // this per example.
  virtual int64_t ForwardFlopsPerExample() const = 0;
  // Every layer in construction order. Backward visits them in reverse and
  // finalises a layer's gradients together, its last variable first (the
  // order TrainStep calls the hook in).
  virtual std::vector<LayerCost> LayerCosts() const = 0;
  // The memory of the last TrainStep() (`training`) or Evaluate().
  virtual StepMemory LastStepMemory(bool training) const { return {}; }
};

// Builds a model graph. Node 0 is the input.
class ModelBuilder {
 public:
  ModelBuilder(std::string model_name, Shape input_shape, int num_classes, DeviceContext* ctx);
  ~ModelBuilder();
  static constexpr int kInput = 0;
  // Adds a layer named `name` fed by `inputs`; returns its node id.
  int Add(const std::string& name, const LayerSpec& spec, std::vector<int> inputs);
  // Convenience for a chain: feeds from the last added node.
  int Then(const std::string& name, const LayerSpec& spec);
  // The node whose output is the logits [N, num_classes].
  absl::StatusOr<std::unique_ptr<Model>> Finish(int logits_node);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Model zoo: registered by name (models/zoo/<name>.cc). Registering also
// makes config validation accept the name as model.name.
using ModelFactory = std::function<absl::StatusOr<std::unique_ptr<Model>>(const ModelConfig&, DeviceContext*)>;
Registry<ModelFactory>& ModelRegistry();
bool RegisterModel(const std::string& name, ModelFactory factory);
std::vector<std::string> RegisteredModels();
// Creates `config.name()` (input_shape and num_classes must be filled in).
absl::StatusOr<std::unique_ptr<Model>> CreateModel(const ModelConfig& config, DeviceContext* ctx);

}  // namespace pstrain
