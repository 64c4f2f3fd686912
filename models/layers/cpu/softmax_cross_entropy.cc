// Softmax cross-entropy over integer labels: oneDNN softmax forward, then
// loss = mean_n(-log(max(p[n, label_n], kSoftmaxCrossEntropyMinProb))) and
// d(loss)/d(logits) = (p - onehot(label)) / N.

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "device/cpu/dnnl_util.h"
#include "models/layers/layer.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

class SoftmaxCrossEntropy final : public LossLayer {
 public:
  // Computed at once: TakeLoss returns what Queue found.
  void Queue(DeviceContext& dctx, const Tensor& logits, const int32_t* labels, Tensor* grad_logits,
             float grad_scale) override {
    CheckLogitsAndLabels(logits, labels);
    CHECK(logits.is_plain()) << "logits must be plain, got " << logits.layout()->ToString();
    CpuContext& ctx = AsCpu(dctx);
    const int64_t n = logits.dim(0), classes = logits.dim(1);
    Prims& p = PrimsFor(ctx, logits.shape());
    Run(ctx, p.softmax, {{DNNL_ARG_SRC, View(p.data, ctx, logits)}, {DNNL_ARG_DST, View(p.data, ctx, p.probs)}});

    const float* probs = p.probs.data();
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      total -= std::log(std::max(probs[i * classes + labels[i]], kSoftmaxCrossEntropyMinProb));
    }
    if (grad_logits != nullptr) {
      CHECK(grad_logits->shape() == logits.shape());
      float* g = grad_logits->data();
      const float scale = grad_scale / static_cast<float>(n);
      for (int64_t i = 0; i < n * classes; ++i) g[i] = probs[i] * scale;
      for (int64_t i = 0; i < n; ++i) g[i * classes + labels[i]] -= scale;
    }
    loss_ = static_cast<float>(total / static_cast<double>(n));
  }

  float TakeLoss() override { return loss_; }

 private:
  float loss_ = 0;
  struct Prims {
    dnnl::memory::desc data;
    Prim softmax;
    Tensor probs;
  };

  Prims& PrimsFor(CpuContext& ctx, const Shape& shape) {
    auto it = cache_.find(shape);
    if (it != cache_.end()) return it->second;
    Prims p;
    p.data = PlainDesc(shape);
    dnnl::softmax_forward::desc desc(dnnl::prop_kind::forward_inference, p.data, /*softmax_axis=*/1);
    p.softmax = MakePrim(dnnl::softmax_forward::primitive_desc(desc, ScratchpadAttr(), ctx.engine()), Work::kMemory);
    p.probs = Tensor(shape);
    return cache_.emplace(shape, std::move(p)).first->second;
  }

  std::map<Shape, Prims> cache_;  // by logits shape
};

const bool kRegistered =
    RegisterSoftmaxCrossEntropy(DeviceKind::kCpu, [] { return std::make_unique<SoftmaxCrossEntropy>(); });

}  // namespace
}  // namespace pstrain::cpu
