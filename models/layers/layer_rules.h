// The device-independent half of every layer type's Setup(), shared by the
// oneDNN layers (cpu/) and the cuDNN/cuBLAS layers (cuda/) so that both
// devices read the same attributes with the same defaults, accept the same
// input shapes with the same output shape, refuse the rest with the same
// status (InvalidArgument, message included), create the same parameters and
// count the same FLOPs.
//
// Setup<Type>() takes the per-example input shapes given to Layer::Setup().
// Those of layers with parameters append them to `parameters` (zero-filled
// plain host tensors, value and grad; the model initialises and places them)
// in the order the layer reads them, and only when the setup succeeds. A
// device's own limits (e.g. cuDNN's on lrn) are checked by its layer after
// the shared call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/layers/layer.h"
#include "models/layers/window.h"

namespace pstrain {

// conv2d. Attributes: "filters" (required, > 0), the window (window.h:
// "kernel" required, "stride" default [1, 1], "padding" default [0, 0]),
// "groups" (default 1; divides both channel counts), "bias" 1/0 (default 1).
// Input [C, H, W] -> output [filters, OH, OW]. Parameters: "weights"
// [filters, C/groups, kh, kw] (HeNormal, fan_in C/groups*kh*kw, fan_out
// filters/groups*kh*kw), then "bias" [filters] (zeros, same fans) when bias=1.
struct Conv2dSetup {
  int64_t filters = 0;
  int64_t groups = 1;
  bool has_bias = true;
  Window2d window;
  Shape input, output;  // per example: [C, H, W], [filters, OH, OW]

  int64_t InputChannelsPerGroup() const { return input[0] / groups; }
  // 2 * output elements * multiply-adds per output element.
  int64_t ForwardFlopsPerExample() const;
};
absl::StatusOr<Conv2dSetup> SetupConv2d(const LayerSpec& spec, const std::vector<Shape>& input_shapes,
                                        std::vector<Parameter>* parameters);

// dense. Attribute "units" (required, > 0). Input: any non-empty shape, read
// as K features (K: its element count) -> output [units]. Parameters:
// "weights" [K, units] (GlorotUniform, fan_in K, fan_out units), then "bias"
// [units] (zeros, same fans).
struct DenseSetup {
  int64_t in_features = 0;  // K
  int64_t units = 0;
  Shape output;  // [units]

  int64_t ForwardFlopsPerExample() const { return 2 * in_features * units; }
};
absl::StatusOr<DenseSetup> SetupDense(const LayerSpec& spec, const std::vector<Shape>& input_shapes,
                                      std::vector<Parameter>* parameters);

// batch_norm. Attributes "epsilon" (default 1e-3, > 0) and "momentum" (the
// running averages' decay, default 0.9, in [0, 1]), both as floats. Input
// [C, H, W] or [C]; output alike. Parameters: "gamma" [C] (ones), then "beta"
// [C] (zeros), fans C.
struct BatchNormSetup {
  float epsilon = 0;
  float momentum = 0;
  int64_t channels = 0;  // C
  int64_t spatial = 1;   // H * W; 1 for [C]
  Shape shape;           // of the input and the output
};
absl::StatusOr<BatchNormSetup> SetupBatchNorm(const LayerSpec& spec, const std::vector<Shape>& input_shapes,
                                              std::vector<Parameter>* parameters);

// lrn (across channels). Attributes "size" (default 5, > 0), "alpha" (default
// 1e-4, >= 0), "beta" (default 0.75), "k" (default 1.0, > 0), the last three
// as floats. Input [C, H, W]; output alike. No parameters.
struct LrnSetup {
  int64_t size = 0;
  float alpha = 0, beta = 0, k = 0;
  Shape shape;  // of the input and the output
};
absl::StatusOr<LrnSetup> SetupLrn(const LayerSpec& spec, const std::vector<Shape>& input_shapes);

// dropout. Attributes "rate" (default 0.5, in [0, 1)) and "seed" (default 0).
// One input of any shape; output alike. No parameters.
struct DropoutSetup {
  double rate = 0;
  uint64_t seed = 0;
  Shape shape;  // of the input and the output
};
absl::StatusOr<DropoutSetup> SetupDropout(const LayerSpec& spec, const std::vector<Shape>& input_shapes);

// The pooling layers (max_pool, avg_pool, global_avg_pool; `type` names the
// layer in errors): one input [C, H, W] -> [C, OH, OW], the window read by
// ReadPoolingWindow (window.h; `global`: the whole input). No parameters.
struct PoolingSetup {
  Window2d window;
  Shape input, output;  // per example: [C, H, W], [C, OH, OW]
};
absl::StatusOr<PoolingSetup> SetupPooling(const LayerSpec& spec, const std::string& type,
                                          const std::vector<Shape>& input_shapes, bool global);

// The output shapes of the layers without attributes or parameters:
// relu: one input of any shape; output alike.
absl::StatusOr<Shape> SetupRelu(const std::vector<Shape>& input_shapes);
// flatten: one input [d1, d2, ...] -> [d1*d2*...].
absl::StatusOr<Shape> SetupFlatten(const std::vector<Shape>& input_shapes);
// add: 2 or more inputs of one shape; output alike.
absl::StatusOr<Shape> SetupAdd(const std::vector<Shape>& input_shapes);
// concat: 1 or more non-empty inputs [C_i, ...] agreeing in all but the
// channel dim -> [sum C_i, ...].
absl::StatusOr<Shape> SetupConcat(const std::vector<Shape>& input_shapes);

// slice (CPU only). Attributes "begin" (default 0, >= 0) and "size"
// (required, > 0). One input of any non-empty shape, read as K features (K:
// its element count); output [size] = features [begin, begin + size), which
// must lie within the K. No parameters.
struct SliceSetup {
  int64_t begin = 0;
  int64_t size = 0;
  int64_t in_features = 0;  // K
  Shape output;             // [size]
};
absl::StatusOr<SliceSetup> SetupSlice(const LayerSpec& spec, const std::vector<Shape>& input_shapes);

// dot_interaction (CPU only), DLRM's pairwise interaction. Attribute
// "features" (required, >= 2): the F vectors of one example. One input of
// any non-empty shape, read as K = F * d features (vector f is features
// [f*d, (f+1)*d)); output [F*(F-1)/2]: the dot products <v_i, v_j> for
// i > j, in DLRM's order (i = 1..F-1, then j = 0..i-1). No parameters.
struct DotInteractionSetup {
  int64_t features = 0;  // F
  int64_t dim = 0;       // d
  Shape output;          // [F*(F-1)/2]

  int64_t Pairs() const { return features * (features - 1) / 2; }
  // A multiply-add per element of each pair's two vectors.
  int64_t ForwardFlopsPerExample() const { return 2 * dim * Pairs(); }
};
absl::StatusOr<DotInteractionSetup> SetupDotInteraction(const LayerSpec& spec, const std::vector<Shape>& input_shapes);

// InvalidArgument when `spec` carries an attribute outside `known` (a
// misspelled "strides" would otherwise silently mean stride 1), or gives an
// integer attribute as a float or the other way round; the message names the
// layer type, the attribute and the ones the type reads. CreateLayer checks
// every spec with it, on every device, against the type's registration.
absl::Status CheckLayerAttributes(const LayerSpec& spec, const LayerAttributes& known);

// Softmax cross-entropy: each example's probability of its label is clamped
// to at least this before the log, which keeps the loss finite when the
// softmax underflows.
inline constexpr float kSoftmaxCrossEntropyMinProb = 1e-30f;

// CHECK-fails unless `logits` (on any device; only its shape is read) is
// [N, classes] and each of the N `labels` (on the host) lies in [0, classes).
void CheckLogitsAndLabels(const Tensor& logits, const int32_t* labels);

}  // namespace pstrain
