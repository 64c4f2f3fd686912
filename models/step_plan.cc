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

// Makes the plans of one graph (MakeStepPlan).
class StepPlanner {
 public:
  StepPlanner(const std::string& name, const std::vector<GraphNode>& nodes, const Shape& input_shape,
              DeviceContext& ctx)
      : name_(name), nodes_(nodes), input_shape_(input_shape), ctx_(&ctx) {}

  std::unique_ptr<StepPlan> Run(int64_t batch, bool training) {
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
      const GraphNode& node = nodes_[k];
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

 private:
  // A tensor that has a shape and a layout but no bytes: what OutputLayout() needs.
  Tensor Placeholder(const Shape& shape, const TensorLayoutPtr& layout) const {
    const size_t bytes = layout ? layout->num_bytes() : static_cast<size_t>(NumElements(shape)) * sizeof(float);
    return Tensor(shape, DType::kFloat32, Buffer::Borrow(nullptr, bytes, nullptr), ctx_->device(), layout);
  }

  static bool Pads(const Tensor& t) { return t.num_bytes() > static_cast<size_t>(t.num_elements()) * sizeof(float); }

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
};

}  // namespace

std::unique_ptr<StepPlan> MakeStepPlan(const std::string& model_name, const std::vector<GraphNode>& nodes,
                                       const Shape& input_shape, DeviceContext& ctx, int64_t batch, bool training) {
  return StepPlanner(model_name, nodes, input_shape, ctx).Run(batch, training);
}

}  // namespace pstrain
