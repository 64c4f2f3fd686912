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
#include "models/memory_plan.h"

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
  std::vector<int> consumers;  // nodes reading this one's output, ascending (repeats kept)
  // >= 0: this node's layer was fused into that node's layer (Layer::Fuse),
  // which computes both; this node's output and gradient are that node's.
  int computed_by = -1;
  // Backward() would copy grad_output into every input's gradient (a fused
  // node, or Layer::PassesGradientThrough()): the model moves gradients itself.
  bool passes_gradient = false;
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
    const bool on_device = ctx_->device().kind != DeviceKind::kCpu;
    for (Node& node : nodes_) {
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

  float TrainStep(const Tensor& images, const int32_t* labels, const GradientReadyHook& hook) override {
    const Tensor& logits = Forward(images, /*training=*/true);
    StepPlan& plan = *plan_;
    float loss;
    if (plan.outputs.back().is_plain()) {
      loss = loss_->ForwardBackward(*ctx_, logits, labels, &plan.grads.back(), loss_scale_);
    } else {  // the loss reads and writes plain tensors
      loss = loss_->ForwardBackward(*ctx_, logits, labels, &plan.plain_grad_logits, loss_scale_);
      ctx_->Convert(plan.plain_grad_logits, plan.grads.back());
    }
    Backward(hook);
    last_train_memory_ = plan.memory;
    return loss;
  }

  void SetLossScale(float scale) override { loss_scale_ = scale; }

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
    for (int64_t i = 0; i < result.examples; ++i) {
      const float* row = host_logits + i * num_classes_;
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
  // Everything a step of one batch size and mode needs, made once (MakePlan)
  // and reused for every step like it.
  //
  // Activations are laid out as each layer asks (OutputLayout()). Gradients
  // are laid out as the activations they belong to and shared where that
  // saves copies: an input of a node that passes its gradient through (add, a
  // fused relu) uses that node's gradient buffer when it is the only writer
  // so far and the layouts agree, provided no later accumulation into the
  // shared buffer can reach a reader that must not see it (CanShare()).
  //
  // Memory: activations, gradient buffers and scratch are views into one
  // arena placed by PlanMemory() from their lifetimes on the step's clock
  // (StepClock), so a buffer's bytes serve another once nothing reads it:
  // an activation lives from its layer's Forward() to the last Forward() or
  // Backward() that reads it (Layer::ReadsInBackward()), a gradient from its
  // first write to its node's Backward(). A tensor whose layout pads (a
  // blocked format over a channel count the block does not divide) keeps
  // bytes of its own all step: its padding must stay zero.
  struct StepPlan {
    int64_t batch = 0;
    bool training = false;
    Tensor arena;
    std::vector<Tensor> outputs;               // [node]; [0] is set to the images each step
    std::vector<Tensor> grads;                 // [node] (training); [0] stays empty; may share buffers
    std::vector<int> parent;                   // [node]: whose gradient buffer it shares, or -1
    std::vector<std::vector<bool>> shared;     // [node][input]: that input shares this node's buffer
    std::vector<std::vector<Tensor>> scratch;  // [node][input], where !direct (and not passed through)
    Tensor plain_logits, plain_grad_logits;    // when the logits layer's output is not plain
    StepMemory memory;
  };

  // Times on a step's clock: Forward() of node k at k, the loss at n (the
  // node count), Backward() of node k at 2n - k.
  struct StepClock {
    int n;
    int Forward(int k) const { return k; }
    int Loss() const { return n; }
    int Backward(int k) const { return 2 * n - k; }
    int End() const { return 2 * n; }
  };

  static constexpr size_t kArenaAlignment = 256;  // what cuDNN and AVX-512 like best
  static constexpr size_t kMaxPlans = 4;          // train and eval batch sizes, an eval remainder

  std::vector<Tensor> InputsOf(const Node& node, const std::vector<Tensor>& outputs) const {
    std::vector<Tensor> inputs;
    inputs.reserve(node.inputs.size());
    for (int in : node.inputs) inputs.push_back(outputs[in]);
    return inputs;
  }

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
    plans_.push_back(MakePlan(batch, training));
    return *plans_.back();
  }

  // A tensor that has a shape and a layout but no bytes: what OutputLayout() needs.
  Tensor Placeholder(const Shape& shape, const TensorLayoutPtr& layout) const {
    const size_t bytes = layout ? layout->num_bytes() : static_cast<size_t>(NumElements(shape)) * sizeof(float);
    return Tensor(shape, DType::kFloat32, Buffer::Borrow(nullptr, bytes, nullptr), ctx_->device(), layout);
  }

  static bool Pads(const Tensor& t) { return t.num_bytes() > static_cast<size_t>(t.num_elements()) * sizeof(float); }

  std::unique_ptr<StepPlan> MakePlan(int64_t batch, bool training) {
    auto plan = std::make_unique<StepPlan>();
    plan->batch = batch;
    plan->training = training;
    const size_t n = nodes_.size();
    const StepClock clock{static_cast<int>(n)};
    // Shapes and layouts, node by node, as Forward() will meet them.
    std::vector<Tensor>& outputs = plan->outputs;
    outputs.assign(n, Tensor());
    outputs[0] = Placeholder(Batched(batch, input_shape_), nullptr);
    for (size_t k = 1; k < n; ++k) {
      const Node& node = nodes_[k];
      if (node.computed_by >= 0) {
        outputs[k] = outputs[node.computed_by];
      } else {
        outputs[k] = Placeholder(Batched(batch, node.shape), node.layer->OutputLayout(*ctx_, InputsOf(node, outputs)));
      }
    }
    if (training) PlanGradientSharing(*plan);

    // Every buffer with its lifetime, and the placeholder (shape and layout)
    // that becomes its view into the arena once placed.
    std::vector<BufferLifetime> lifetimes;
    std::vector<Tensor*> slots;
    auto add = [&](Tensor* slot, int first, int last) {
      if (Pads(*slot)) first = 0, last = clock.End();
      lifetimes.push_back({slot->num_bytes(), first, last});
      slots.push_back(slot);
    };
    // Activations: from the producer's Forward() to the last read.
    std::vector<int> last_read(n, 0);
    for (size_t k = 1; k < n; ++k) {
      const int owner = nodes_[k].computed_by >= 0 ? nodes_[k].computed_by : static_cast<int>(k);
      int& last = last_read[owner];
      last = std::max(last, clock.Forward(owner));
      for (int c : nodes_[k].consumers) {
        last = std::max(last, clock.Forward(c));
        if (training && !nodes_[c].passes_gradient && nodes_[c].layer->ReadsInBackward().inputs) {
          last = std::max(last, clock.Backward(c));
        }
      }
      if (k == n - 1) last = std::max(last, clock.Loss());
      if (training && owner == static_cast<int>(k) && !nodes_[k].passes_gradient &&
          nodes_[k].layer->ReadsInBackward().output) {
        last = std::max(last, clock.Backward(static_cast<int>(k)));
      }
    }
    for (size_t k = 1; k < n; ++k) {
      if (nodes_[k].computed_by >= 0) continue;
      add(&outputs[k], clock.Forward(static_cast<int>(k)), last_read[k]);
    }
    if (training) {
      // Gradients: a shared buffer from its members' first write to their last read.
      std::vector<int> first_write(n, clock.End()), grad_last_read(n, 0);
      for (size_t m = 1; m < n; ++m) {
        const int root = RootOf(plan->parent, static_cast<int>(m));
        const int write = m == n - 1 ? clock.Loss() : clock.Backward(nodes_[m].consumers.back());
        first_write[root] = std::min(first_write[root], write);
        grad_last_read[root] = std::max(grad_last_read[root], clock.Backward(static_cast<int>(m)));
      }
      for (size_t r = 1; r < n; ++r) {
        if (plan->parent[r] >= 0) continue;
        plan->grads[r] = outputs[r];  // laid out as its activation
        add(&plan->grads[r], first_write[r], grad_last_read[r]);
      }
      for (size_t k = 1; k < n; ++k) {
        for (Tensor& scratch : plan->scratch[k]) {
          if (scratch.empty()) continue;
          const int t = clock.Backward(static_cast<int>(k));
          add(&scratch, t, t);
        }
      }
    }

    const MemoryPlan placed = PlanMemory(lifetimes, kArenaAlignment);
    plan->arena = ctx_->Allocate({static_cast<int64_t>((placed.arena_bytes + sizeof(float) - 1) / sizeof(float))});
    char* base = static_cast<char*>(plan->arena.raw());
    for (size_t i = 0; i < slots.size(); ++i) {
      Tensor& t = *slots[i];
      t = Tensor(t.shape(), DType::kFloat32,
                 Buffer::Borrow(base + placed.offsets[i], lifetimes[i].bytes, plan->arena.buffer()),
                 plan->arena.device(), t.layout());
    }
    for (size_t k = 1; k < n; ++k) {
      if (nodes_[k].computed_by >= 0) outputs[k] = outputs[nodes_[k].computed_by];
      if (training && plan->parent[k] >= 0) plan->grads[k] = plan->grads[RootOf(plan->parent, static_cast<int>(k))];
    }
    if (!outputs.back().is_plain()) {
      plan->plain_logits = ctx_->Allocate(outputs.back().shape());
      if (training) plan->plain_grad_logits = ctx_->Allocate(outputs.back().shape());
    }
    plan->memory = {static_cast<int64_t>(placed.arena_bytes), static_cast<int64_t>(placed.total_bytes),
                    static_cast<int64_t>(LiveBytesPeak(lifetimes, kArenaAlignment)),
                    static_cast<int>(lifetimes.size())};
    VLOG(1) << name_ << ": " << (training ? "training" : "evaluation") << " plan for batch " << batch << ": "
            << lifetimes.size() << " buffers in an arena of " << placed.arena_bytes << " bytes (" << placed.total_bytes
            << " apart, live peak " << plan->memory.live_peak_bytes << ")";
    return plan;
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

  // Decides which gradients share a buffer (plan.parent, plan.shared) and
  // where a scratch tensor is needed: plan.scratch gets placeholders (shape
  // and layout) for MakePlan to place; plan.grads is sized for it to fill.
  void PlanGradientSharing(StepPlan& plan) {
    const size_t n = nodes_.size();
    const std::vector<Tensor>& outputs = plan.outputs;
    plan.grads.assign(n, Tensor());
    plan.scratch.assign(n, {});
    plan.shared.assign(n, {});
    plan.parent.assign(n, -1);
    for (size_t k = n - 1; k >= 1; --k) {
      const Node& node = nodes_[k];
      plan.scratch[k].resize(node.inputs.size());
      plan.shared[k].assign(node.inputs.size(), false);
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        const int in = node.inputs[j];
        if (in == 0) continue;
        const bool same_layout = SameLayout(outputs[in].layout(), outputs[k].layout());
        if (node.passes_gradient && node.direct[j] && same_layout &&
            std::count(node.inputs.begin(), node.inputs.end(), in) == 1 &&
            CanShare(plan.parent, in, static_cast<int>(k))) {
          plan.parent[in] = static_cast<int>(k);
          plan.shared[k][j] = true;
        }
        // Scratch: where a contribution is added rather than written, unless
        // it is passed through in the right layout already.
        if (!node.direct[j] && !(node.passes_gradient && same_layout)) plan.scratch[k][j] = outputs[in];
      }
    }
    for (size_t k = 1; k < n; ++k) {
      VLOG(2) << name_ << ": gradient of " << nodes_[k].name
              << (plan.parent[k] >= 0 ? " shares " + nodes_[plan.parent[k]].name + "'s buffer" : " has its own buffer");
    }
  }

  // The root of the buffer-sharing tree `x` belongs to.
  static int RootOf(const std::vector<int>& parent, int x) {
    while (parent[x] >= 0) x = parent[x];
    return x;
  }

  // Whether node `a` may share the gradient buffer of node `k`, its largest
  // consumer. A shared buffer holds several gradients over time: each member
  // y is read by y's Backward() (step y, counting down) and must then hold
  // exactly d(loss)/d(y); the other consumers of a member ("separate
  // writers") add into the buffer at their own steps. An ancestor's gradient
  // is part of its descendants', so only members on other branches
  // constrain: a's separate writers must run after such a y was read (index
  // not above y: at step y itself Backward() reads before the model adds),
  // and y's after a was read.
  bool CanShare(const std::vector<int>& parent, int a, int k) const {
    std::vector<bool> ancestor(nodes_.size(), false);
    for (int x = k; x >= 0; x = parent[x]) ancestor[x] = true;
    const int root = RootOf(parent, k);
    auto writes_after = [this](int member, int shares_with, int step) {
      for (int c : nodes_[member].consumers) {
        if (c != shares_with && c > step) return false;
      }
      return true;
    };
    for (int y = 1; y < static_cast<int>(nodes_.size()); ++y) {
      if (ancestor[y] || y == a || parent[y] < 0 || RootOf(parent, y) != root) continue;
      if (!writes_after(a, k, y) || !writes_after(y, parent[y], a)) return false;
    }
    return true;
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
      const Node& node = nodes_[k];
      if (node.computed_by >= 0) continue;  // outputs[k] is its computing node's
      node.layer->Forward(*ctx_, InputsOf(node, outputs), outputs[k], training);
    }
    if (outputs.back().is_plain()) return outputs.back();
    ctx_->Convert(outputs.back(), plan_->plain_logits);
    return plan_->plain_logits;
  }

  // Expects plan_->grads.back() to hold d(loss)/d(logits).
  void Backward(const GradientReadyHook& hook) {
    StepPlan& plan = *plan_;
    const std::vector<Tensor>& grads = plan.grads;
    for (size_t k = nodes_.size() - 1; k >= 1; --k) {
      Node& node = nodes_[k];
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
      std::vector<Tensor> grad_inputs(node.inputs.size());  // empty for the images: not wanted
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        int in = node.inputs[j];
        if (in != 0) grad_inputs[j] = node.direct[j] ? grads[in] : plan.scratch[k][j];
      }
      node.layer->Backward(*ctx_, InputsOf(node, plan.outputs), plan.outputs[k], grads[k], absl::MakeSpan(grad_inputs));
      // On a GPU the stream orders everything; hooks synchronise themselves
      // when they read gradients from the host (GradientReadyHook).
      if (ctx_->device().kind == DeviceKind::kCpu) ctx_->Synchronize();
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        if (node.inputs[j] != 0 && !node.direct[j]) ctx_->Accumulate(grads[node.inputs[j]], grad_inputs[j]);
      }
      if (!hook) continue;
      for (int p = static_cast<int>(node.layer->parameters().size()) - 1; p >= 0; --p) hook(node.first_variable + p);
    }
  }

  const std::string name_;
  const Shape input_shape_;
  const int num_classes_;
  DeviceContext* const ctx_;
  std::vector<Node> nodes_;  // nodes_.back() is the logits
  std::unique_ptr<LossLayer> loss_;
  float loss_scale_ = 1;
  std::vector<Variable> variables_;
  std::vector<Parameter*> params_;  // parallel to variables_

  std::vector<std::unique_ptr<StepPlan>> plans_;  // at most kMaxPlans, most recently used last
  StepPlan* plan_ = nullptr;                      // the current step's
  StepMemory last_train_memory_, last_eval_memory_;
  Tensor device_images_;  // the images, copied to a non-CPU device
  Tensor host_logits_;    // Evaluate()'s logits, read back from a non-CPU device
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
  for (size_t k = 1; k < nodes.size(); ++k) {
    for (int in : nodes[k].inputs) nodes[in].consumers.push_back(static_cast<int>(k));
  }
  // Fusion: a parameterless layer that is the only reader of its input's
  // output is offered to the layer producing that input.
  std::vector<bool> fused_next(nodes.size(), false);
  for (size_t k = 1; k < nodes.size(); ++k) {
    Node& node = nodes[k];
    if (node.inputs.size() != 1 || !node.layer->parameters().empty()) continue;
    const int j = node.inputs[0];
    if (j == 0 || nodes[j].consumers.size() != 1 || nodes[j].computed_by >= 0 || fused_next[j]) continue;
    if (nodes[j].layer->Fuse(specs[k].spec)) {
      node.computed_by = j;
      fused_next[j] = true;
    }
  }
  for (size_t k = 1; k < nodes.size(); ++k) {
    nodes[k].passes_gradient = nodes[k].computed_by >= 0 || nodes[k].layer->PassesGradientThrough();
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
