#include "models/graph_model.h"

#include <cmath>
#include <numbers>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

absl::Status Prefixed(const absl::Status& s, const std::string& prefix) {
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

Shape Batched(int64_t batch, const Shape& shape) {
  Shape s = {batch};
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

struct Node {
  std::string name;
  std::unique_ptr<Layer> layer;  // null for the input node
  std::vector<int> inputs;
  Shape shape;  // per-example output shape
  // This node's parameters are variables [first_variable, + parameters().size()).
  int first_variable = 0;
  // direct[j]: the gradient for inputs[j] is written straight into that
  // node's gradient (it is the first writer in backward order); otherwise it
  // goes through a scratch tensor and is added.
  std::vector<bool> direct;
};

class GraphModel final : public Model {
 public:
  GraphModel(std::string name, Shape input_shape, int num_classes, DeviceContext* ctx, std::vector<Node> nodes,
             std::unique_ptr<LossLayer> loss)
      : name_(std::move(name)),
        input_shape_(std::move(input_shape)),
        num_classes_(num_classes),
        ctx_(ctx),
        nodes_(std::move(nodes)),
        loss_(std::move(loss)) {
    for (Node& node : nodes_) {
      if (!node.layer) continue;
      node.first_variable = static_cast<int>(variables_.size());
      for (Parameter& p : node.layer->parameters()) {
        variables_.push_back({absl::StrCat(node.name, "/", p.name), p.value, p.grad});
        params_.push_back(&p);
      }
    }
  }

  const std::string& name() const override { return name_; }
  const Shape& input_shape() const override { return input_shape_; }
  int num_classes() const override { return num_classes_; }
  std::vector<Variable>& variables() override { return variables_; }

  void InitializeVariables(uint64_t seed) override {
    for (size_t i = 0; i < variables_.size(); ++i) {
      InitializeParameter(*params_[i], seed, static_cast<int>(i), variables_[i].value);
    }
  }

  float TrainStep(const Tensor& images, const int32_t* labels, const GradientReadyHook& hook) override {
    Forward(images, /*training=*/true);
    float loss = loss_->ForwardBackward(*ctx_, outputs_.back(), labels, &grads_.back());
    Backward(images, hook);
    return loss;
  }

  EvalResult Evaluate(const Tensor& images, const int32_t* labels) override {
    Forward(images, /*training=*/false);
    const Tensor& logits = outputs_.back();
    EvalResult result;
    result.examples = logits.dim(0);
    result.mean_loss = loss_->ForwardBackward(*ctx_, logits, labels, nullptr);
    for (int64_t i = 0; i < result.examples; ++i) {
      const float* row = logits.data() + i * num_classes_;
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

 private:
  // (Re)allocates activations and gradients when the batch size changes.
  void Allocate(int64_t batch) {
    if (batch == batch_) return;
    batch_ = batch;
    const size_t n = nodes_.size();
    outputs_.assign(n, Tensor());
    grads_.assign(n, Tensor());
    scratch_.assign(n, {});
    for (size_t k = 1; k < n; ++k) {
      outputs_[k] = Tensor(Batched(batch, nodes_[k].shape));
      grads_[k] = Tensor(Batched(batch, nodes_[k].shape));
      const Node& node = nodes_[k];
      scratch_[k].resize(node.inputs.size());
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        int in = node.inputs[j];
        if (in != 0 && !node.direct[j]) scratch_[k][j] = Tensor(Batched(batch, nodes_[in].shape));
      }
    }
  }

  std::vector<Tensor> InputsOf(const Node& node) const {
    std::vector<Tensor> inputs;
    inputs.reserve(node.inputs.size());
    for (int in : node.inputs) inputs.push_back(outputs_[in]);
    return inputs;
  }

  void Forward(const Tensor& images, bool training) {
    CHECK(images.rank() == 1 + static_cast<int>(input_shape_.size()) &&
          Shape(images.shape().begin() + 1, images.shape().end()) == input_shape_)
        << name_ << ": images are " << ShapeToString(images.shape()) << ", want [N] + " << ShapeToString(input_shape_);
    Allocate(images.dim(0));
    outputs_[0] = images;
    for (size_t k = 1; k < nodes_.size(); ++k) {
      std::vector<Tensor> inputs = InputsOf(nodes_[k]);
      nodes_[k].layer->Forward(*ctx_, inputs, outputs_[k], training);
    }
  }

  // Expects grads_.back() to hold d(loss)/d(logits).
  void Backward(const Tensor& images, const GradientReadyHook& hook) {
    for (size_t k = nodes_.size() - 1; k >= 1; --k) {
      Node& node = nodes_[k];
      std::vector<Tensor> grad_inputs(node.inputs.size());  // empty for the images: not wanted
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        int in = node.inputs[j];
        if (in != 0) grad_inputs[j] = node.direct[j] ? grads_[in] : scratch_[k][j];
      }
      std::vector<Tensor> inputs = InputsOf(node);
      node.layer->Backward(*ctx_, inputs, outputs_[k], grads_[k], absl::MakeSpan(grad_inputs));
      ctx_->Synchronize();
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        if (node.inputs[j] != 0 && !node.direct[j]) AddInto(grads_[node.inputs[j]], grad_inputs[j]);
      }
      if (!hook) continue;
      for (int p = static_cast<int>(node.layer->parameters().size()) - 1; p >= 0; --p) hook(node.first_variable + p);
    }
  }

  // Host tensors only, as every device's tensors are today.
  static void AddInto(const Tensor& sum, const Tensor& addend) {
    float* s = sum.data();
    const float* a = addend.data();
    for (int64_t i = 0; i < sum.num_elements(); ++i) s[i] += a[i];
  }

  const std::string name_;
  const Shape input_shape_;
  const int num_classes_;
  DeviceContext* const ctx_;
  std::vector<Node> nodes_;  // nodes_.back() is the logits
  std::unique_ptr<LossLayer> loss_;
  std::vector<Variable> variables_;
  std::vector<const Parameter*> params_;  // parallel to variables_

  int64_t batch_ = -1;
  std::vector<Tensor> outputs_;               // [node]; outputs_[0] is the images
  std::vector<Tensor> grads_;                 // [node]; grads_[0] stays empty
  std::vector<std::vector<Tensor>> scratch_;  // [node][input], where !direct
};

}  // namespace

void InitializeParameter(const Parameter& param, uint64_t seed, int variable_index, Tensor& value) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(variable_index)};
  std::mt19937_64 rng(seq);
  // Uniform in [0, 1) from 53 random bits; spelled out (not a std::
  // distribution) so values do not depend on the standard library.
  auto uniform = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  float* v = value.data();
  const int64_t n = value.num_elements();
  switch (param.init) {
    case Initializer::kZeros:
      value.SetZero();
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

absl::StatusOr<std::unique_ptr<Model>> BuildGraphModel(std::string name, Shape input_shape, int num_classes,
                                                       DeviceContext* ctx, std::vector<GraphNodeSpec> specs,
                                                       int logits_node) {
  const std::string where = absl::StrCat("model \"", name, "\": ");
  if (ctx == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, "no device context"));
  if (num_classes <= 0) return absl::InvalidArgumentError(absl::StrCat(where, "num_classes must be positive"));
  if (logits_node < 1 || logits_node >= static_cast<int>(specs.size())) {
    return absl::InvalidArgumentError(absl::StrCat(where, "logits node ", logits_node, " is not a layer"));
  }
  // Every layer must feed the logits (else its variables would get no gradient).
  std::vector<bool> feeds(specs.size(), false);
  feeds[logits_node] = true;
  for (int k = logits_node; k >= 1; --k) {
    if (!feeds[k]) continue;
    for (int in : specs[k].inputs) feeds[in] = true;
  }
  std::set<std::string> names;
  for (size_t k = 1; k < specs.size(); ++k) {
    if (!feeds[k]) {
      return absl::InvalidArgumentError(absl::StrCat(where, "layer \"", specs[k].name, "\" does not feed the logits"));
    }
    if (!names.insert(specs[k].name).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, "two layers are named \"", specs[k].name, "\""));
    }
  }

  std::vector<Node> nodes(specs.size());
  nodes[0].name = "input";
  nodes[0].shape = input_shape;
  for (size_t k = 1; k < specs.size(); ++k) {
    Node& node = nodes[k];
    node.name = specs[k].name;
    node.inputs = specs[k].inputs;
    const std::string layer_where = absl::StrCat(where, "layer \"", node.name, "\" (", specs[k].spec.type, "): ");
    auto layer = CreateLayer(specs[k].spec, ctx->device().kind);
    if (!layer.ok()) return Prefixed(layer.status(), layer_where);
    node.layer = std::move(*layer);
    std::vector<Shape> input_shapes;
    for (int in : node.inputs) input_shapes.push_back(nodes[in].shape);
    auto shape = node.layer->Setup(input_shapes);
    if (!shape.ok()) return Prefixed(shape.status(), layer_where);
    node.shape = std::move(*shape);
  }
  if (nodes[logits_node].shape != Shape{num_classes}) {
    return absl::InvalidArgumentError(absl::StrCat(where, "logits \"", nodes[logits_node].name, "\" are ",
                                                   ShapeToString(nodes[logits_node].shape), ", want [", num_classes,
                                                   "]"));
  }
  // In backward order, the first writer of each node's gradient writes it directly.
  std::vector<bool> written(nodes.size(), false);
  for (int k = logits_node; k >= 1; --k) {
    Node& node = nodes[k];
    node.direct.assign(node.inputs.size(), false);
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      int in = node.inputs[j];
      if (in == 0 || written[in]) continue;
      node.direct[j] = true;
      written[in] = true;
    }
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LossLayer> loss, CreateSoftmaxCrossEntropy(ctx->device().kind));
  return std::unique_ptr<Model>(
      new GraphModel(std::move(name), std::move(input_shape), num_classes, ctx, std::move(nodes), std::move(loss)));
}

}  // namespace pstrain
