// add: y = x_0 + x_1 + ..., elementwise over inputs of one shape, on oneDNN
// sum. No attributes, no parameters. Every input's gradient is grad_output.
#include <map>

#include "absl/strings/str_cat.h"
#include "models/layers/cpu/dnnl_util.h"

namespace pstrain::cpu {
namespace {

class Add final : public Layer {
 public:
  explicit Add(const LayerSpec&) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    if (input_shapes.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat("add takes 2 or more inputs, got ", input_shapes.size()));
    }
    for (size_t i = 1; i < input_shapes.size(); ++i) {
      if (input_shapes[i] != input_shapes[0]) {
        return absl::InvalidArgumentError(absl::StrCat("add inputs differ in shape: ", ShapeToString(input_shapes[0]),
                                                       " vs ", ShapeToString(input_shapes[i])));
      }
    }
    num_inputs_ = static_cast<int>(input_shapes.size());
    return input_shapes[0];
  }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CpuContext& ctx = AsCpu(dctx);
    const int64_t elements = inputs[0].num_elements();
    auto it = cache_.find(elements);
    if (it == cache_.end()) {
      dnnl::memory::desc data = PlainDesc({elements});
      std::vector<float> scales(num_inputs_, 1.0f);
      std::vector<dnnl::memory::desc> srcs(num_inputs_, data);
      it = cache_.emplace(elements, dnnl::sum(dnnl::sum::primitive_desc(data, scales, srcs, ctx.engine()))).first;
    }
    dnnl::memory::desc data = PlainDesc({elements});
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_DST, View(data, ctx, output)}};
    for (int i = 0; i < num_inputs_; ++i) args.emplace(DNNL_ARG_MULTIPLE_SRC + i, View(data, ctx, inputs[i]));
    ExecuteAndWait(ctx, it->second, args);
  }

  void Backward(DeviceContext& ctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    for (Tensor& g : grad_inputs) {
      if (!g.empty()) g.CopyFrom(grad_output);
    }
  }

 private:
  int num_inputs_ = 0;
  std::map<int64_t, dnnl::sum> cache_;  // by element count
};

PSTRAIN_REGISTER_LAYER("add", DeviceKind::kCpu, Add);

}  // namespace
}  // namespace pstrain::cpu
