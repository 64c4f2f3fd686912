// Momentum SGD as in TensorFlow's MomentumOptimizer:
//   v' = m * v + (s * g + wd * w);   w' = w - lr * v'   (s: the step's gradient scale)
// (CUDA: optim/cuda/momentum.cc.)
#include "optim/optimizer.h"

namespace pstrain {
namespace {

class Momentum : public Optimizer {
 public:
  explicit Momentum(const OptimizerConfig& config)
      : momentum_(config.momentum()), weight_decay_(config.weight_decay()) {}
  int num_slots() const override { return 1; }
  void Apply(const float* w, const float* g, int64_t n, const OptimizerStep& step, float* const* slots,
             float* out) const override {
    float* v = slots[0];
    const float m = momentum_, wd = weight_decay_, lr = step.learning_rate, s = step.gradient_scale;
    if (s == 1.0f) {  // the same arithmetic as s * g with s == 1, one multiply less
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) {
        v[i] = m * v[i] + (g[i] + wd * w[i]);
        out[i] = w[i] - lr * v[i];
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) {
        v[i] = m * v[i] + (s * g[i] + wd * w[i]);
        out[i] = w[i] - lr * v[i];
      }
    }
  }

 private:
  float momentum_;
  float weight_decay_;
};

const bool kRegistered =
    OptimizerRegistry(DeviceKind::kCpu).Register("momentum", [](const OptimizerConfig& c, DeviceStream) {
      return std::unique_ptr<Optimizer>(new Momentum(c));
    });

}  // namespace
}  // namespace pstrain
