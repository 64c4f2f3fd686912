// Helpers shared by the zoo's convolutional models (header-only, zoo-internal).
//
// Spec builders for the layer types the zoo uses, the spatial arithmetic of
// convolution/pooling (floor((x + 2p - k) / s) + 1, as the layers compute it),
// so a model can adapt its layout to a small input, and the conv -> batch_norm
// -> relu unit of ResNet and InceptionV3.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/model.h"

namespace pstrain::zoo {

inline Shape InputShapeOf(const ModelConfig& config) {
  return Shape(config.input_shape().begin(), config.input_shape().end());
}

// Checks that the input is [C, H, W] with H, W >= min_hw.
inline absl::Status CheckImageInput(const ModelConfig& config, int64_t min_hw) {
  if (config.input_shape_size() != 3 || config.input_shape(1) < min_hw || config.input_shape(2) < min_hw) {
    std::string got;
    for (int d : config.input_shape()) absl::StrAppend(&got, got.empty() ? "" : ",", d);
    return absl::InvalidArgumentError(absl::StrCat("model \"", config.name(),
                                                   "\": input_shape must be [channels, height, width] with height "
                                                   "and width >= ",
                                                   min_hw, ", got [", got, "]"));
  }
  return absl::OkStatus();
}

// conv2d with a kh x kw kernel, stride s (both dims) and padding (ph, pw).
inline LayerSpec Conv(int64_t filters, int64_t kh, int64_t kw, int64_t stride, int64_t ph, int64_t pw,
                      bool bias = true) {
  return LayerSpec{"conv2d"}
      .Int("filters", filters)
      .Ints("kernel", {kh, kw})
      .Ints("stride", {stride, stride})
      .Ints("padding", {ph, pw})
      .Int("bias", bias ? 1 : 0);
}

// A square k x k conv2d.
inline LayerSpec Conv(int64_t filters, int64_t k, int64_t stride, int64_t pad, bool bias = true) {
  return Conv(filters, k, k, stride, pad, pad, bias);
}

// "max_pool" or "avg_pool", square.
inline LayerSpec Pool(const std::string& type, int64_t k, int64_t stride, int64_t pad = 0) {
  return LayerSpec{type}.Ints("kernel", {k, k}).Ints("stride", {stride, stride}).Ints("padding", {pad, pad});
}

// Running averages decay by 0.9 per step (PyTorch's momentum 0.1).
inline LayerSpec BatchNorm(double epsilon) {
  return LayerSpec{"batch_norm"}.Float("epsilon", epsilon).Float("momentum", 0.9);
}

inline LayerSpec Dense(int64_t units) { return LayerSpec{"dense"}.Int("units", units); }

inline LayerSpec Dropout(double rate, int64_t seed) {
  return LayerSpec{"dropout"}.Float("rate", rate).Int("seed", seed);
}

// Output length of a convolution or pooling window along one axis (floor mode).
inline int64_t WindowOut(int64_t in, int64_t k, int64_t stride, int64_t pad) { return (in + 2 * pad - k) / stride + 1; }

// conv (no bias) -> batch_norm -> relu, as nodes "<name>/conv", "<name>/bn"
// and "<name>/relu" (variables "<name>/conv/weights", "<name>/bn/...").
// Returns the relu's node id. `relu` false leaves it out (returns the bn).
inline int ConvBn(ModelBuilder& b, const std::string& name, int input, const LayerSpec& conv, double bn_epsilon,
                  bool relu = true) {
  int n = b.Add(name + "/conv", conv, {input});
  n = b.Add(name + "/bn", BatchNorm(bn_epsilon), {n});
  if (relu) n = b.Add(name + "/relu", LayerSpec{"relu"}, {n});
  return n;
}

}  // namespace pstrain::zoo
