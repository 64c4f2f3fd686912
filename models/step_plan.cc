#include "models/step_plan.h"

#include <algorithm>
#include <utility>

#include "glog/logging.h"
#include "models/memory_plan.h"

namespace pstrain {
namespace {

constexpr size_t kArenaAlignment = 256;  // what cuDNN and AVX-512 like best

Shape Batched(int64_t batch, const Shape& shape) {
  Shape s = {batch};
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

// Times on a step's clock: Forward() of node k at k, the loss at n (the
// node count), Backward() of node k at 2n - k.
struct StepClock {
  int n;
  int Forward(int k) const { return k; }
  int Loss() const { return n; }
  int Backward(int k) const { return 2 * n - k; }
  int End() const { return 2 * n; }
};

// Makes one plan (MakeStepPlan): Run() once.
class StepPlanner {
 public:
  StepPlanner(const std::string& name, const std::vector<GraphNode>& nodes, const Shape& input_shape,
              DeviceContext& ctx, int64_t batch, bool training)
      : name_(name),
        nodes_(nodes),
        input_shape_(input_shape),
        ctx_(&ctx),
        batch_(batch),
        training_(training),
        clock_{static_cast<int>(nodes.size())},
        plan_(std::make_unique<StepPlan>()) {
    plan_->batch = batch;
    plan_->training = training;
  }

  std::unique_ptr<StepPlan> Run() {
    PlanLayouts();
    if (training_) PlanGradientSharing(*plan_);
    AddActivations();
    if (training_) {
      AddGradients();
      AddScratch();
    }
    const MemoryPlan placed = PlanMemory(lifetimes_, kArenaAlignment);
    PlaceInArena(placed);
    ShareBuffers();
    AllocatePlainLogits();
    RecordMemory(placed);
    return std::move(plan_);
  }

 private:
  // Shapes and layouts, node by node, as Forward() will meet them: every
  // output a placeholder (no bytes yet); a fused node's is its computing
  // node's.
  void PlanLayouts() {
    std::vector<Tensor>& outputs = plan_->outputs;
    outputs.assign(nodes_.size(), Tensor());
    outputs[0] = Placeholder(Batched(batch_, input_shape_), nullptr);
    for (size_t k = 1; k < nodes_.size(); ++k) {
      const GraphNode& node = nodes_[k];
      if (node.computed_by >= 0) {
        outputs[k] = outputs[node.computed_by];
      } else {
        outputs[k] = Placeholder(Batched(batch_, node.shape), node.layer->OutputLayout(*ctx_, InputsOf(node, outputs)));
      }
    }
  }

  // A buffer to place: `slot` holds its placeholder (shape and layout) and
  // becomes its view into the arena once placed. It lives [first, last] on
  // the clock, or all step when its layout pads.
  void AddBuffer(Tensor* slot, int first, int last) {
    if (Pads(*slot)) first = 0, last = clock_.End();
    lifetimes_.push_back({slot->num_bytes(), first, last});
    slots_.push_back(slot);
  }

  // [node]: the last time the activation a node computes (for itself and
  // the nodes fused into it) is read: by a consumer's Forward(), the loss,
  // or a Backward() that reads its input or output.
  std::vector<int> ActivationLastReads() const {
    const size_t n = nodes_.size();
    std::vector<int> last_read(n, 0);
    for (size_t k = 1; k < n; ++k) {
      const int owner = nodes_[k].computed_by >= 0 ? nodes_[k].computed_by : static_cast<int>(k);
      int& last = last_read[owner];
      last = std::max(last, clock_.Forward(owner));
      for (int c : nodes_[k].consumers) {
        last = std::max(last, clock_.Forward(c));
        if (training_ && !nodes_[c].passes_gradient && nodes_[c].layer->ReadsInBackward().inputs) {
          last = std::max(last, clock_.Backward(c));
        }
      }
      if (k == n - 1) last = std::max(last, clock_.Loss());
      if (training_ && owner == static_cast<int>(k) && !nodes_[k].passes_gradient &&
          nodes_[k].layer->ReadsInBackward().output) {
        last = std::max(last, clock_.Backward(static_cast<int>(k)));
      }
    }
    return last_read;
  }

  // Activations: from the producer's Forward() to the last read.
  void AddActivations() {
    const std::vector<int> last_read = ActivationLastReads();
    for (size_t k = 1; k < nodes_.size(); ++k) {
      if (nodes_[k].computed_by >= 0) continue;
      AddBuffer(&plan_->outputs[k], clock_.Forward(static_cast<int>(k)), last_read[k]);
    }
  }

  // Gradients: a shared buffer from its members' first write to their last read.
  void AddGradients() {
    const size_t n = nodes_.size();
    std::vector<int> first_write(n, clock_.End()), grad_last_read(n, 0);
    for (size_t m = 1; m < n; ++m) {
      const int root = RootOf(plan_->parent, static_cast<int>(m));
      const int write = m == n - 1 ? clock_.Loss() : clock_.Backward(nodes_[m].consumers.back());
      first_write[root] = std::min(first_write[root], write);
      grad_last_read[root] = std::max(grad_last_read[root], clock_.Backward(static_cast<int>(m)));
    }
    for (size_t r = 1; r < n; ++r) {
      if (plan_->parent[r] >= 0) continue;
      plan_->grads[r] = plan_->outputs[r];  // laid out as its activation
      AddBuffer(&plan_->grads[r], first_write[r], grad_last_read[r]);
    }
  }

  // Scratch: for its node's Backward() alone.
  void AddScratch() {
    for (size_t k = 1; k < nodes_.size(); ++k) {
      for (Tensor& scratch : plan_->scratch[k]) {
        if (scratch.empty()) continue;
        const int t = clock_.Backward(static_cast<int>(k));
        AddBuffer(&scratch, t, t);
      }
    }
  }

  // Allocates the arena and makes every added buffer its view there.
  void PlaceInArena(const MemoryPlan& placed) {
    plan_->arena = ctx_->Allocate({static_cast<int64_t>((placed.arena_bytes + sizeof(float) - 1) / sizeof(float))});
    char* base = static_cast<char*>(plan_->arena.raw());
    for (size_t i = 0; i < slots_.size(); ++i) {
      Tensor& t = *slots_[i];
      t = Tensor(t.shape(), DType::kFloat32,
                 Buffer::Borrow(base + placed.offsets[i], lifetimes_[i].bytes, plan_->arena.buffer()),
                 plan_->arena.device(), t.layout());
    }
  }

  // Tensors without a buffer of their own take the placed one they share: a
  // fused node's output is its computing node's, a gradient sharing a buffer
  // is its root's.
  void ShareBuffers() {
    for (size_t k = 1; k < nodes_.size(); ++k) {
      if (nodes_[k].computed_by >= 0) plan_->outputs[k] = plan_->outputs[nodes_[k].computed_by];
      if (training_ && plan_->parent[k] >= 0) {
        plan_->grads[k] = plan_->grads[RootOf(plan_->parent, static_cast<int>(k))];
      }
    }
  }

  // The loss reads and writes plain tensors: plain logits (and their
  // gradient) of their own when the logits layer's output is not plain.
  void AllocatePlainLogits() {
    const Tensor& logits = plan_->outputs.back();
    if (logits.is_plain()) return;
    plan_->plain_logits = ctx_->Allocate(logits.shape());
    if (training_) plan_->plain_grad_logits = ctx_->Allocate(logits.shape());
  }

  void RecordMemory(const MemoryPlan& placed) {
    plan_->memory = {static_cast<int64_t>(placed.arena_bytes), static_cast<int64_t>(placed.total_bytes),
                     static_cast<int64_t>(LiveBytesPeak(lifetimes_, kArenaAlignment)),
                     static_cast<int>(lifetimes_.size())};
    VLOG(1) << name_ << ": " << (training_ ? "training" : "evaluation") << " plan for batch " << batch_ << ": "
            << lifetimes_.size() << " buffers in an arena of " << placed.arena_bytes << " bytes (" << placed.total_bytes
            << " apart, live peak " << plan_->memory.live_peak_bytes << ")";
  }

  // A tensor that has a shape and a layout but no bytes: what OutputLayout() needs.
  Tensor Placeholder(const Shape& shape, const TensorLayoutPtr& layout) const {
    const size_t bytes = layout ? layout->num_bytes() : static_cast<size_t>(NumElements(shape)) * sizeof(float);
    return Tensor(shape, DType::kFloat32, Buffer::Borrow(nullptr, bytes, nullptr), ctx_->device(), layout);
  }

  static bool Pads(const Tensor& t) { return t.num_bytes() > static_cast<size_t>(t.num_elements()) * sizeof(float); }

  // Decides which gradients share a buffer (plan.parent, plan.shared) and
  // where a scratch tensor is needed: plan.scratch gets placeholders (shape
  // and layout) for Run() to place; plan.grads is sized for it to fill.
  void PlanGradientSharing(StepPlan& plan) {
    const size_t n = nodes_.size();
    const std::vector<Tensor>& outputs = plan.outputs;
    plan.grads.assign(n, Tensor());
    plan.scratch.assign(n, {});
    plan.shared.assign(n, {});
    plan.parent.assign(n, -1);
    for (size_t k = n - 1; k >= 1; --k) {
      const GraphNode& node = nodes_[k];
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

  const std::string& name_;
  const std::vector<GraphNode>& nodes_;
  const Shape& input_shape_;
  DeviceContext* const ctx_;
  const int64_t batch_;
  const bool training_;
  const StepClock clock_;
  std::unique_ptr<StepPlan> plan_;
  // Every buffer to place with its lifetime (AddBuffer), and the tensor that
  // becomes its view.
  std::vector<BufferLifetime> lifetimes_;
  std::vector<Tensor*> slots_;
};

}  // namespace

std::unique_ptr<StepPlan> MakeStepPlan(const std::string& model_name, const std::vector<GraphNode>& nodes,
                                       const Shape& input_shape, DeviceContext& ctx, int64_t batch, bool training) {
  return StepPlanner(model_name, nodes, input_shape, ctx, batch, training).Run();
}

}  // namespace pstrain
