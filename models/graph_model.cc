#include "models/graph_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "models/graph_node.h"
#include "models/step_plan.h"

namespace pstrain {
namespace {

class GraphModel final : public Model {
 public:
  GraphModel(std::string name, Shape input_shape, int num_classes, DeviceContext* ctx, std::vector<GraphNode> nodes,
             std::unique_ptr<LossLayer> loss)
      : name_(std::move(name)),
        input_shape_(std::move(input_shape)),
        num_classes_(num_classes),
        ctx_(ctx),
        nodes_(std::move(nodes)),
        loss_(std::move(loss)) {
    const bool on_device = ctx_->device().kind != DeviceKind::kCpu;
    for (GraphNode& node : nodes_) {
      if (!node.layer) continue;
      node.first_variable = static_cast<int>(variables_.size());
      for (Parameter& p : node.layer->parameters()) {
        if (on_device) {  // layers read their parameters at Forward()/Backward() time
          p.value = ctx_->Allocate(p.value.shape());
          p.grad = ctx_->Allocate(p.grad.shape());
        }
        variables_.push_back({absl::StrCat(node.name, "/", p.name), p.value, p.grad});
        params_.push_back(&p);
      }
    }
    PlaceGradientsContiguously();
  }

  const std::string& name() const override { return name_; }
  const Shape& input_shape() const override { return input_shape_; }
  int num_classes() const override { return num_classes_; }
  std::vector<Variable>& variables() override { return variables_; }

  void InitializeVariables(uint64_t seed) override {
    for (size_t i = 0; i < variables_.size(); ++i) {
      Tensor& value = variables_[i].value;
      if (value.on_host()) {
        InitializeParameter(*params_[i], seed, static_cast<int>(i), value);
      } else {  // drawn on the host (same values on every device), then copied
        Tensor host(value.shape());
        InitializeParameter(*params_[i], seed, static_cast<int>(i), host);
        ctx_->Convert(host, value);
      }
    }
    ctx_->Synchronize();
  }

  void InitializeVariablePrefixes(uint64_t seed, const std::vector<absl::Span<float>>& prefixes) override {
    CHECK_EQ(prefixes.size(), params_.size()) << "one prefix per variable";
    for (size_t i = 0; i < params_.size(); ++i) {
      InitializeParameter(*params_[i], seed, static_cast<int>(i), prefixes[i]);
    }
  }

  float TrainStep(const Tensor& images, const int32_t* labels, const GradientReadyHook& hook) override {
    const Tensor& logits = Forward(images, /*training=*/true);
    StepPlan& plan = *plan_;
    if (plan.outputs.back().is_plain()) {
      loss_->Queue(*ctx_, logits, labels, &plan.grads.back(), loss_scale_);
    } else {  // the loss reads and writes plain tensors
      loss_->Queue(*ctx_, logits, labels, &plan.plain_grad_logits, loss_scale_);
      ctx_->Convert(plan.plain_grad_logits, plan.grads.back());
    }
    input_gradient_written_ = false;
    Backward(hook);
    if (keep_input_gradient_ && !input_gradient_written_) input_grad_ = ctx_->Allocate(images.shape());  // zeros
    last_train_memory_ = plan.memory;
    // Read once backward is queued: on a GPU the host waits for the loss
    // while the device runs backward, not before queuing it.
    return loss_->TakeLoss();
  }

  absl::Status KeepInputGradient() override {
    for (size_t k = 1; k < nodes_.size(); ++k) {
      const GraphNode& node = nodes_[k];
      if (!node.passes_gradient) continue;
      if (std::find(node.inputs.begin(), node.inputs.end(), 0) != node.inputs.end()) {
        return absl::FailedPreconditionError(absl::StrCat(name_, ": layer \"", node.name,
                                                          "\" passes its gradient through and reads the input: "
                                                          "the input gradient needs a layer that computes it"));
      }
    }
    keep_input_gradient_ = true;
    return absl::OkStatus();
  }

  const Tensor& InputGradient() const override { return input_grad_; }

  void SetLossScale(float scale) override { loss_scale_ = scale; }
  void SetVariableWait(VariableWait wait) override { variable_wait_ = std::move(wait); }

  EvalResult Evaluate(const Tensor& images, const int32_t* labels) override {
    const Tensor& logits = Forward(images, /*training=*/false);
    last_eval_memory_ = plan_->memory;
    EvalResult result;
    result.examples = logits.dim(0);
    result.mean_loss = loss_->ForwardBackward(*ctx_, logits, labels, nullptr);
    const float* host_logits = logits.data();
    if (!logits.on_host()) {
      if (host_logits_.shape() != logits.shape()) host_logits_ = Tensor(logits.shape());
      ctx_->Convert(logits, host_logits_);
      host_logits = host_logits_.data();
    }
    if (num_classes_ == 2) result.margins.resize(result.examples);
    for (int64_t i = 0; i < result.examples; ++i) {
      const float* row = host_logits + i * num_classes_;
      if (num_classes_ == 2) result.margins[i] = row[1] - row[0];
      int best = 0;
      for (int c = 1; c < num_classes_; ++c) {
        if (row[c] > row[best]) best = c;
      }
      if (best == labels[i]) ++result.correct;
    }
    return result;
  }

  std::vector<std::pair<std::string, Shape>> LayerShapes() const override {
    std::vector<std::pair<std::string, Shape>> shapes;
    for (size_t k = 1; k < nodes_.size(); ++k) shapes.emplace_back(nodes_[k].name, nodes_[k].shape);
    return shapes;
  }

  int64_t ForwardFlopsPerExample() const override {
    int64_t flops = 0;
    for (size_t k = 1; k < nodes_.size(); ++k) flops += nodes_[k].layer->ForwardFlopsPerExample();
    return flops;
  }

  std::vector<LayerCost> LayerCosts() const override {
    std::vector<LayerCost> costs;
    for (size_t k = 1; k < nodes_.size(); ++k) {
      LayerCost cost{nodes_[k].name, nodes_[k].layer->ForwardFlopsPerExample(), {}};
      for (size_t p = 0; p < nodes_[k].layer->parameters().size(); ++p) {
        cost.variables.push_back(nodes_[k].first_variable + static_cast<int>(p));
      }
      costs.push_back(std::move(cost));
    }
    return costs;
  }

  StepMemory LastStepMemory(bool training) const override { return training ? last_train_memory_ : last_eval_memory_; }

 private:
  static constexpr size_t kMaxPlans = 4;  // train and eval batch sizes, an eval remainder

  // The plan for (batch, training), made on first use; most recently used last.
  StepPlan& PlanFor(int64_t batch, bool training) {
    for (size_t i = 0; i < plans_.size(); ++i) {
      if (plans_[i]->batch == batch && plans_[i]->training == training) {
        std::rotate(plans_.begin() + static_cast<std::ptrdiff_t>(i),
                    plans_.begin() + static_cast<std::ptrdiff_t>(i) + 1, plans_.end());
        return *plans_.back();
      }
    }
    if (plans_.size() == kMaxPlans) plans_.erase(plans_.begin());  // its arena goes back to the device
    plans_.push_back(MakeStepPlan(name_, nodes_, input_shape_, *ctx_, batch, training));
    return *plans_.back();
  }

  // Every parameter's gradient becomes a view into one buffer, in variable
  // order, so a run of consecutive variables is one contiguous range (the
  // all-reduce reduces a fusion bucket in place, without packing it).
  void PlaceGradientsContiguously() {
    int64_t total = 0;
    for (const Parameter* p : params_) total += p->grad.num_elements();
    if (total == 0) return;
    const Tensor arena = ctx_->Allocate({total});
    char* base = static_cast<char*>(arena.raw());
    int64_t offset = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      Parameter& p = *params_[i];
      const size_t bytes = static_cast<size_t>(p.grad.num_elements()) * sizeof(float);
      p.grad = Tensor(p.grad.shape(), DType::kFloat32,
                      Buffer::Borrow(base + offset * sizeof(float), bytes, arena.buffer()), arena.device());
      variables_[i].grad = p.grad;
      offset += p.grad.num_elements();
    }
  }

  // Runs every layer under the plan for this batch and mode (plan_ after);
  // returns the logits, plain.
  const Tensor& Forward(const Tensor& images, bool training) {
    CHECK(images.rank() == 1 + static_cast<int>(input_shape_.size()) &&
          Shape(images.shape().begin() + 1, images.shape().end()) == input_shape_)
        << name_ << ": images are " << ShapeToString(images.shape()) << ", want [N] + " << ShapeToString(input_shape_);
    CHECK(images.is_plain()) << name_ << ": images must be plain row-major";
    plan_ = &PlanFor(images.dim(0), training);
    std::vector<Tensor>& outputs = plan_->outputs;
    if (images.device() == ctx_->device()) {
      outputs[0] = images;
    } else {  // host images onto the device
      if (device_images_.shape() != images.shape()) {
        device_images_ = Tensor();  // back to the device's cache before the new allocation
        device_images_ = ctx_->Allocate(images.shape());
      }
      ctx_->Convert(images, device_images_);
      outputs[0] = device_images_;
    }
    for (size_t k = 1; k < nodes_.size(); ++k) {
      const GraphNode& node = nodes_[k];
      if (node.computed_by >= 0) continue;  // outputs[k] is its computing node's
      if (training && variable_wait_) WaitForVariablesOf(static_cast<int>(k));
      node.layer->Forward(*ctx_, InputsOf(node, outputs), outputs[k], training);
    }
    if (outputs.back().is_plain()) return outputs.back();
    ctx_->Convert(outputs.back(), plan_->plain_logits);
    return plan_->plain_logits;
  }

  // variable_wait_ for the variables node k's Forward reads: its own and
  // those of the nodes it computes for (fusions).
  void WaitForVariablesOf(int k) {
    for (size_t m = 1; m < nodes_.size(); ++m) {
      if (static_cast<int>(m) != k && nodes_[m].computed_by != k) continue;
      const int params = static_cast<int>(nodes_[m].layer->parameters().size());
      for (int p = 0; p < params; ++p) variable_wait_(nodes_[m].first_variable + p);
    }
  }

  // Expects plan_->grads.back() to hold d(loss)/d(logits).
  void Backward(const GradientReadyHook& hook) {
    StepPlan& plan = *plan_;
    const std::vector<Tensor>& grads = plan.grads;
    for (size_t k = nodes_.size() - 1; k >= 1; --k) {
      GraphNode& node = nodes_[k];
      if (node.passes_gradient) {
        for (size_t j = 0; j < node.inputs.size(); ++j) {
          const int in = node.inputs[j];
          if (in == 0 || plan.shared[k][j]) continue;
          if (node.direct[j]) {
            ctx_->Convert(grads[k], grads[in]);
          } else if (plan.scratch[k][j].empty()) {  // same layout: add it as it is
            ctx_->Accumulate(grads[in], grads[k]);
          } else {
            ctx_->Convert(grads[k], plan.scratch[k][j]);
            ctx_->Accumulate(grads[in], plan.scratch[k][j]);
          }
        }
        continue;  // no parameters
      }
      // Empty for the images (not wanted) unless their gradient is kept.
      std::vector<Tensor> grad_inputs(node.inputs.size());
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        int in = node.inputs[j];
        if (in != 0) grad_inputs[j] = node.direct[j] ? grads[in] : plan.scratch[k][j];
        if (in == 0 && keep_input_gradient_) grad_inputs[j] = InputGradientTarget(plan.outputs[0].shape());
      }
      node.layer->Backward(*ctx_, InputsOf(node, plan.outputs), plan.outputs[k], grads[k], absl::MakeSpan(grad_inputs));
      // On a GPU the stream orders everything; hooks synchronise themselves
      // when they read gradients from the host (GradientReadyHook).
      if (ctx_->device().kind == DeviceKind::kCpu) ctx_->Synchronize();
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        if (node.inputs[j] != 0 && !node.direct[j]) ctx_->Accumulate(grads[node.inputs[j]], grad_inputs[j]);
        if (node.inputs[j] == 0 && keep_input_gradient_) AddToInputGradient(grad_inputs[j]);
      }
      if (!hook) continue;
      for (int p = static_cast<int>(node.layer->parameters().size()) - 1; p >= 0; --p) hook(node.first_variable + p);
    }
  }

  // Where a layer writes its gradient of the images: the input gradient
  // itself for the first one in backward order, scratch for the others.
  Tensor InputGradientTarget(const Shape& shape) {
    Tensor& target = input_gradient_written_ ? input_scratch_ : input_grad_;
    if (target.shape() != shape) target = ctx_->Allocate(shape);
    return target;
  }
  void AddToInputGradient(const Tensor& written) {
    if (input_gradient_written_) ctx_->Accumulate(input_grad_, written);
    input_gradient_written_ = true;
  }

  const std::string name_;
  const Shape input_shape_;
  const int num_classes_;
  DeviceContext* const ctx_;
  std::vector<GraphNode> nodes_;  // nodes_.back() is the logits
  std::unique_ptr<LossLayer> loss_;
  float loss_scale_ = 1;
  VariableWait variable_wait_;
  std::vector<Variable> variables_;
  std::vector<Parameter*> params_;  // parallel to variables_

  std::vector<std::unique_ptr<StepPlan>> plans_;  // at most kMaxPlans, most recently used last
  StepPlan* plan_ = nullptr;                      // the current step's
  StepMemory last_train_memory_, last_eval_memory_;
  Tensor device_images_;  // the images, copied to a non-CPU device
  Tensor host_logits_;    // Evaluate()'s logits, read back from a non-CPU device
  bool keep_input_gradient_ = false;
  bool input_gradient_written_ = false;  // by a layer of this step's backward
  Tensor input_grad_, input_scratch_;    // d(loss)/d(images); a second writer's share
};

}  // namespace

void InitializeParameter(const Parameter& param, uint64_t seed, int variable_index, Tensor& value) {
  InitializeParameter(param, seed, variable_index, absl::Span<float>(value.data(), value.num_elements()));
}

void InitializeParameter(const Parameter& param, uint64_t seed, int variable_index, absl::Span<float> values) {
  CHECK_LE(static_cast<int64_t>(values.size()), param.value.num_elements()) << param.name;
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(variable_index)};
  std::mt19937_64 rng(seq);
  // Uniform in [0, 1) from 53 random bits; spelled out (not a std::
  // distribution) so values do not depend on the standard library.
  auto uniform = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  float* v = values.data();
  const int64_t n = static_cast<int64_t>(values.size());
  switch (param.init) {
    case Initializer::kZeros:
      std::fill(values.begin(), values.end(), 0.0f);
      break;
    case Initializer::kOnes:
      for (int64_t i = 0; i < n; ++i) v[i] = 1.0f;
      break;
    case Initializer::kGlorotUniform: {
      const double a = std::sqrt(6.0 / static_cast<double>(param.fan_in + param.fan_out));
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((2 * uniform() - 1) * a);
      break;
    }
    case Initializer::kHeNormal: {
      const double stddev = std::sqrt(2.0 / static_cast<double>(param.fan_in));
      for (int64_t i = 0; i < n; ++i) {  // Box-Muller
        double r = std::sqrt(-2 * std::log(1 - uniform()));
        v[i] = static_cast<float>(stddev * r * std::cos(2 * std::numbers::pi * uniform()));
      }
      break;
    }
  }
}

// ---------------------------------------------------------------- building

namespace {

absl::Status Prefixed(const absl::Status& s, const std::string& prefix) {
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

// [node]: whether it feeds `logits_node` (which feeds itself).
std::vector<bool> FeedsLogits(const std::vector<GraphNodeSpec>& specs, int logits_node) {
  std::vector<bool> feeds(specs.size(), false);
  feeds[logits_node] = true;
  for (int k = logits_node; k >= 1; --k) {
    if (!feeds[k]) continue;
    for (int in : specs[k].inputs) feeds[in] = true;
  }
  return feeds;
}

// What the specs must be before any layer is made: a device context,
// classes, a logits node that is a layer, every layer feeding the logits
// (else its variables would get no gradient), no two layers of one name.
// `where` begins every message.
absl::Status CheckSpecs(const std::string& where, const DeviceContext* ctx, int num_classes,
                        const std::vector<GraphNodeSpec>& specs, int logits_node) {
  if (ctx == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, "no device context"));
  if (num_classes <= 0) return absl::InvalidArgumentError(absl::StrCat(where, "num_classes must be positive"));
  if (logits_node < 1 || logits_node >= static_cast<int>(specs.size())) {
    return absl::InvalidArgumentError(absl::StrCat(where, "logits node ", logits_node, " is not a layer"));
  }
  const std::vector<bool> feeds = FeedsLogits(specs, logits_node);
  std::set<std::string> names;
  for (size_t k = 1; k < specs.size(); ++k) {
    if (!feeds[k]) {
      return absl::InvalidArgumentError(absl::StrCat(where, "layer \"", specs[k].name, "\" does not feed the logits"));
    }
    if (!names.insert(specs[k].name).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, "two layers are named \"", specs[k].name, "\""));
    }
  }
  return absl::OkStatus();
}

// The nodes of `specs`, each layer made for `device` and set up in node
// order (its output shape from its inputs'); nodes[0] is the input, of
// per-example shape `input_shape`. A layer's error names it after `where`.
absl::StatusOr<std::vector<GraphNode>> CreateNodes(const std::string& where, const Shape& input_shape,
                                                   const std::vector<GraphNodeSpec>& specs, DeviceKind device) {
  std::vector<GraphNode> nodes(specs.size());
  nodes[0].name = "input";
  nodes[0].shape = input_shape;
  for (size_t k = 1; k < specs.size(); ++k) {
    GraphNode& node = nodes[k];
    node.name = specs[k].name;
    node.inputs = specs[k].inputs;
    const std::string layer_where = absl::StrCat(where, "layer \"", node.name, "\" (", specs[k].spec.type, "): ");
    auto layer = CreateLayer(specs[k].spec, device);
    if (!layer.ok()) return Prefixed(layer.status(), layer_where);
    node.layer = std::move(*layer);
    std::vector<Shape> input_shapes;
    for (int in : node.inputs) input_shapes.push_back(nodes[in].shape);
    auto shape = node.layer->Setup(input_shapes);
    if (!shape.ok()) return Prefixed(shape.status(), layer_where);
    node.shape = std::move(*shape);
  }
  return nodes;
}

absl::Status CheckLogitsShape(const std::string& where, const GraphNode& logits, int num_classes) {
  if (logits.shape == Shape{num_classes}) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(where, "logits \"", logits.name, "\" are ",
                                                 ShapeToString(logits.shape), ", want [", num_classes, "]"));
}

// Every node's consumers, ascending.
void LinkConsumers(std::vector<GraphNode>& nodes) {
  for (size_t k = 1; k < nodes.size(); ++k) {
    for (int in : nodes[k].inputs) nodes[in].consumers.push_back(static_cast<int>(k));
  }
}

// Fusion: a parameterless layer that is the only reader of its input's
// output is offered to the layer producing that input (computed_by).
void FuseLayers(const std::vector<GraphNodeSpec>& specs, std::vector<GraphNode>& nodes) {
  std::vector<bool> fused_next(nodes.size(), false);
  for (size_t k = 1; k < nodes.size(); ++k) {
    GraphNode& node = nodes[k];
    if (node.inputs.size() != 1 || !node.layer->parameters().empty()) continue;
    const int j = node.inputs[0];
    if (j == 0 || nodes[j].consumers.size() != 1 || nodes[j].computed_by >= 0 || fused_next[j]) continue;
    if (nodes[j].layer->Fuse(specs[k].spec)) {
      node.computed_by = j;
      fused_next[j] = true;
    }
  }
}

// How gradients flow: passes_gradient for fused nodes and layers that pass
// theirs through; direct for the first writer of each node's gradient in
// backward order.
void MarkGradientFlow(std::vector<GraphNode>& nodes, int logits_node) {
  for (size_t k = 1; k < nodes.size(); ++k) {
    nodes[k].passes_gradient = nodes[k].computed_by >= 0 || nodes[k].layer->PassesGradientThrough();
  }
  std::vector<bool> written(nodes.size(), false);
  for (int k = logits_node; k >= 1; --k) {
    GraphNode& node = nodes[k];
    node.direct.assign(node.inputs.size(), false);
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      int in = node.inputs[j];
      if (in == 0 || written[in]) continue;
      node.direct[j] = true;
      written[in] = true;
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> BuildGraphModel(std::string name, Shape input_shape, int num_classes,
                                                       DeviceContext* ctx, std::vector<GraphNodeSpec> specs,
                                                       int logits_node) {
  const std::string where = absl::StrCat("model \"", name, "\": ");
  PSTRAIN_RETURN_IF_ERROR(CheckSpecs(where, ctx, num_classes, specs, logits_node));
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<GraphNode> nodes, CreateNodes(where, input_shape, specs, ctx->device().kind));
  PSTRAIN_RETURN_IF_ERROR(CheckLogitsShape(where, nodes[logits_node], num_classes));
  LinkConsumers(nodes);
  FuseLayers(specs, nodes);
  MarkGradientFlow(nodes, logits_node);
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LossLayer> loss, CreateSoftmaxCrossEntropy(ctx->device().kind));
  return std::unique_ptr<Model>(
      new GraphModel(std::move(name), std::move(input_shape), num_classes, ctx, std::move(nodes), std::move(loss)));
}

}  // namespace pstrain
