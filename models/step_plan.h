// The plan of one step of a graph model (graph_model.cc) for one batch size
// and mode: every activation, gradient and scratch tensor the step uses, as
// views into one arena placed by lifetime (memory_plan.h). Internal to
// models/.
//
// Activations are laid out as each layer asks (OutputLayout()). Gradients
// are laid out as the activations they belong to and shared where that
// saves copies: an input of a node that passes its gradient through (add, a
// fused relu) uses that node's gradient buffer when it is the only writer
// so far and the layouts agree, provided no later accumulation into the
// shared buffer can reach a reader that must not see it.
//
// Memory: activations, gradient buffers and scratch are views into one
// arena placed by PlanMemory() from their lifetimes on the step's clock
// (forward of node k at k, the loss at n, backward of node k at 2n - k), so
// a buffer's bytes serve another once nothing reads it: an activation lives
// from its layer's Forward() to the last Forward() or Backward() that reads
// it (Layer::ReadsInBackward()), a gradient from its first write to its
// node's Backward(). A tensor whose layout pads (a blocked format over a
// channel count the block does not divide) keeps bytes of its own all step:
// its padding must stay zero.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "device/device_context.h"
#include "models/graph_node.h"
#include "models/model.h"

namespace pstrain {

// Everything a step of one batch size and mode needs, made once and reused
// for every step like it.
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

// The plan for a step of `batch` examples through `nodes` (nodes[0] is the
// input, of per-example shape `input_shape`; nodes.back() the logits), with
// backward when `training`. Its arena and plain logits are allocated from
// `ctx`, which the nodes' layers run on. `model_name` is for logs.
std::unique_ptr<StepPlan> MakeStepPlan(const std::string& model_name, const std::vector<GraphNode>& nodes,
                                       const Shape& input_shape, DeviceContext& ctx, int64_t batch, bool training);

}  // namespace pstrain
