// Adagrad as in TensorFlow's AdagradOptimizer (initial_accumulator_value =
// config.initial_accumulator, a0 below):
//   g = s * grad + wd * w;   acc' = acc + g^2;   w' = w - lr * g / sqrt(acc')
// (s: the step's gradient scale, wd: weight_decay). One slot.
//
// Slot contract: slots come zero-initialised, so slot 0 holds the
// accumulator's offset from its start, acc - a0 (the sum of the squared
// gradients so far), and a zero slot means acc == a0. Anything that reads or
// writes the slot outside Apply() (checkpoints, resharding) sees that offset.
// a0 > 0 (config validation) keeps the first update finite when g == 0.
#include <cmath>

#include "optim/optimizer.h"

namespace pstrain {
namespace {

class Adagrad : public Optimizer {
 public:
  explicit Adagrad(const OptimizerConfig& config)
      : initial_accumulator_(config.initial_accumulator()), weight_decay_(config.weight_decay()) {}
  int num_slots() const override { return 1; }
  void Apply(const float* w, const float* grad, int64_t n, const OptimizerStep& step, float* const* slots,
             float* out) const override {
    float* sum_sq = slots[0];  // acc - a0
    const float a0 = initial_accumulator_, wd = weight_decay_, lr = step.learning_rate, s = step.gradient_scale;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float g = s * grad[i] + wd * w[i];
      sum_sq[i] += g * g;
      out[i] = w[i] - lr * g / std::sqrt(sum_sq[i] + a0);
    }
  }

 private:
  float initial_accumulator_;
  float weight_decay_;
};

const bool kRegistered =
    OptimizerRegistry(DeviceKind::kCpu).Register("adagrad", [](const OptimizerConfig& c, DeviceStream) {
      return std::unique_ptr<Optimizer>(new Adagrad(c));
    });

}  // namespace
}  // namespace pstrain
