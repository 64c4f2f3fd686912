// Plain SGD with optional L2 weight decay: w' = w - lr * (s * g + wd * w),
// s the step's gradient scale.
// (CUDA: optim/cuda/sgd.cc.)
#include "optim/optimizer.h"

namespace pstrain {
namespace {

class Sgd : public Optimizer {
 public:
  explicit Sgd(const OptimizerConfig& config) : weight_decay_(config.weight_decay()) {}
  int num_slots() const override { return 0; }
  void Apply(const float* w, const float* g, int64_t n, const OptimizerStep& step, float* const* slots,
             float* out) const override {
    const float wd = weight_decay_, lr = step.learning_rate, s = step.gradient_scale;
    if (s == 1.0f) {  // the same arithmetic as s * g with s == 1, one multiply less
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = w[i] - lr * (g[i] + wd * w[i]);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = w[i] - lr * (s * g[i] + wd * w[i]);
    }
  }

 private:
  float weight_decay_;
};

const bool kRegistered =
    OptimizerRegistry(DeviceKind::kCpu).Register("sgd", [](const OptimizerConfig& c, DeviceStream) {
      return std::unique_ptr<Optimizer>(new Sgd(c));
    });

}  // namespace
}  // namespace pstrain
