// The cuDNN pooling layer behind the CUDA max_pool, avg_pool and
// global_avg_pool (each registered in its own file). Input [C, H, W] ->
// [C, OH, OW], the window read as on the CPU (ReadPoolingWindow); padding is
// symmetric and output sizes are floor mode, as cuDNN computes them.
// 16-bit channels-last inputs (HalfNhwcLayout) give outputs in the same
// arrangement; plain ones plain.
#pragma once

#include <cudnn.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/layers/cuda/cudnn_util.h"
#include "models/layers/layer.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cuda {

class Pooling final : public Layer {
 public:
  // `type` names the layer in errors; `mode` is the cuDNN pooling mode; a
  // global pool's window is the whole input and ignores the spec.
  Pooling(std::string type, cudnnPoolingMode_t mode, const LayerSpec& spec, bool global);

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override;
  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override;
  void Forward(DeviceContext& ctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override;
  void Backward(DeviceContext& ctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override;

 private:
  // Descriptors for one batched input shape.
  struct Descriptors {
    TensorDescriptor input, output;  // also those of the input's and output's gradients
  };
  // By the input's shape and layout.
  Descriptors& DescriptorsFor(const Tensor& input);
  // The output's layout for `input`'s.
  TensorLayoutPtr OutputLayoutFor(const Tensor& input) const;

  const std::string type_;
  const cudnnPoolingMode_t mode_;
  const LayerSpec spec_;
  const bool global_;
  PoolingSetup setup_;                                              // window and per-example shapes
  std::optional<PoolingDescriptor> pooling_;                        // made on first use
  std::map<std::pair<Shape, cudnnDataType_t>, Descriptors> cache_;  // by batched input shape and type
};

}  // namespace pstrain::cuda
