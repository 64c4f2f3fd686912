// Adam as in TensorFlow's AdamOptimizer (Kingma & Ba's algorithm with the
// bias correction folded into the rate and epsilon added to sqrt(v), their
// "epsilon hat"):
//   t = updates_before + 1;   g = s * grad + wd * w
//   m' = b1 m + (1 - b1) g;   v' = b2 v + (1 - b2) g^2
//   w' = w - lr * sqrt(1 - b2^t) / (1 - b1^t) * m' / (sqrt(v') + epsilon)
// (s: the step's gradient scale, wd: weight_decay, an L2 term in the gradient,
// not AdamW's decoupled decay). t counts the updates of the variable, or on an
// embedding table of the row, that Apply() is given (OptimizerStep::
// updates_before): rows updated only when touched get lazy Adam. Two slots,
// m and v, both starting at 0 (the zero-initialised slots as they come).
#include <cmath>

#include "optim/optimizer.h"

namespace pstrain {
namespace {

class Adam : public Optimizer {
 public:
  explicit Adam(const OptimizerConfig& config)
      : beta1_(config.beta1()),
        beta2_(config.beta2()),
        epsilon_(config.epsilon()),
        weight_decay_(config.weight_decay()) {}
  int num_slots() const override { return 2; }
  void Apply(const float* w, const float* grad, int64_t n, const OptimizerStep& step, float* const* slots,
             float* out) const override {
    float* m = slots[0];
    float* v = slots[1];
    // The bias correction, once per call and in double: b^t of a large t
    // underflows gracefully to 0 and the factor to 1.
    const double t = static_cast<double>(step.updates_before) + 1.0;
    const double correction =
        std::sqrt(1.0 - std::pow(static_cast<double>(beta2_), t)) / (1.0 - std::pow(static_cast<double>(beta1_), t));
    const float lr_t = static_cast<float>(step.learning_rate * correction);
    const float b1 = beta1_, b2 = beta2_, eps = epsilon_, wd = weight_decay_, s = step.gradient_scale;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float g = s * grad[i] + wd * w[i];
      m[i] = b1 * m[i] + (1.0f - b1) * g;
      v[i] = b2 * v[i] + (1.0f - b2) * (g * g);
      out[i] = w[i] - lr_t * m[i] / (std::sqrt(v[i]) + eps);
    }
  }

 private:
  float beta1_;
  float beta2_;
  float epsilon_;
  float weight_decay_;
};

const bool kRegistered =
    OptimizerRegistry(DeviceKind::kCpu).Register("adam", [](const OptimizerConfig& c, DeviceStream) {
      return std::unique_ptr<Optimizer>(new Adam(c));
    });

}  // namespace
}  // namespace pstrain
