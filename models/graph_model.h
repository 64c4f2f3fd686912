// The Model that ModelBuilder::Finish() returns: a DAG of layers numbered in
// construction order. Internal to models/; build models with ModelBuilder.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/layers/layer.h"
#include "models/model.h"

namespace pstrain {

// One node as ModelBuilder records it.
struct GraphNodeSpec {
  std::string name;
  LayerSpec spec;
  std::vector<int> inputs;  // node ids, each smaller than this node's id
};

// nodes[i] is node i; nodes[0] is the input (its spec is ignored). Creates
// the layers for ctx's device, runs Setup in node order, and checks that
// layer names are unique, that every layer feeds `logits_node` and that the
// logits are [num_classes]. `ctx` must outlive the model.
absl::StatusOr<std::unique_ptr<Model>> BuildGraphModel(std::string name, Shape input_shape, int num_classes,
                                                       DeviceContext* ctx, std::vector<GraphNodeSpec> nodes,
                                                       int logits_node);

// Fills `value` from `param`'s initializer with a generator seeded from
// (seed, variable_index) alone: the same pair gives the same values on every
// platform.
void InitializeParameter(const Parameter& param, uint64_t seed, int variable_index, Tensor& value);
// The same draws, only the first values.size() of them (values.size() <=
// the parameter's elements; the fans set the scale): a prefix of what the
// Tensor overload fills.
void InitializeParameter(const Parameter& param, uint64_t seed, int variable_index, absl::Span<float> values);

}  // namespace pstrain
