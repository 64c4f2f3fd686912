// One node of a graph model as built (BuildGraphModel, graph_model.cc): its
// layer, its place in the graph and how its gradients flow. Internal to
// models/: what the graph model and its step plans (step_plan.h) share.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "models/layers/layer.h"

namespace pstrain {

struct GraphNode {
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

// `node`'s inputs among `outputs` (every node's output, by node id).
inline std::vector<Tensor> InputsOf(const GraphNode& node, const std::vector<Tensor>& outputs) {
  std::vector<Tensor> inputs;
  inputs.reserve(node.inputs.size());
  for (int in : node.inputs) inputs.push_back(outputs[in]);
  return inputs;
}

}  // namespace pstrain
