// The oneDNN pooling layer behind max_pool, avg_pool and global_avg_pool
// (each registered in its own file). Input [C, H, W] -> [C, OH, OW].
//
// Layouts: works in the input's format; oneDNN chooses the output's
// (format_tag::any, in practice the input's).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device/cpu/dnnl_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cpu {

class Pooling final : public Layer {
 public:
  // `type` names the layer in errors. A global pool's window is the whole
  // input (stride 1, no padding) and ignores the spec; otherwise the spec
  // gives "kernel" (required), "stride" (default: the kernel) and "padding"
  // (default 0, each side, smaller than the kernel).
  Pooling(std::string type, dnnl::algorithm algorithm, const LayerSpec& spec, bool global);

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override;
  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override;
  // Backward reads neither (max pooling keeps its workspace).
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = false}; }
  void Forward(DeviceContext& ctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override;
  void Backward(DeviceContext& ctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override;

 private:
  // Primitives for one input descriptor; backward made on first use.
  struct Prims {
    dnnl::memory::desc src;  // the key
    dnnl::pooling_forward::primitive_desc fwd_pd;
    Prim fwd;
    dnnl::memory::desc dst;
    Tensor workspace;  // max pooling: where the maxima were, for backward
    std::optional<Prim> bwd;
  };
  Prims& PrimsFor(CpuContext& ctx, const Tensor& input);

  const std::string type_;
  const dnnl::algorithm algorithm_;
  const LayerSpec spec_;
  const bool global_;
  PoolingSetup setup_;  // window and per-example shapes
  std::vector<std::unique_ptr<Prims>> cache_;
};

}  // namespace pstrain::cpu
