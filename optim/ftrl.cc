// FTRL-Proximal, McMahan et al. 2013, "Ad Click Prediction: a View from the
// Trenches", Algorithm 1, per coordinate, with alpha = the step's learning
// rate, beta = ftrl_beta, lambda1 = l1, lambda2 = l2, n0 = initial_accumulator:
//   g = s * grad                      (s: the step's gradient scale; no
//                                      weight_decay: l2 is FTRL's own)
//   sigma = (sqrt(n + g^2) - sqrt(n)) / alpha
//   z' = z + g - sigma * w;   n' = n + g^2
//   w' = 0                                          if |z'| <= l1
//        -(z' - sign(z') l1) / ((beta + sqrt(n')) / alpha + l2)   otherwise
// with n starting at n0 and z at 0. The paper keeps no w between updates (it
// derives w from z and n); here w is the variable itself, so a weight set from
// outside (initialisation, a checkpoint) enters through sigma * w. Weights
// that L1 zeroes are written as exactly 0.0f. Two slots.
//
// Slot contract: slots come zero-initialised, so slot 0 holds z and slot 1
// holds n's offset from its start, n - n0 (the sum of the squared gradients
// so far): a zero slot 1 means n == n0. Anything that reads or writes the
// slots outside Apply() (checkpoints, resharding) sees that offset.
#include <cmath>

#include "optim/optimizer.h"

namespace pstrain {
namespace {

class Ftrl : public Optimizer {
 public:
  explicit Ftrl(const OptimizerConfig& config)
      : initial_accumulator_(config.initial_accumulator()),
        beta_(config.ftrl_beta()),
        l1_(config.l1()),
        l2_(config.l2()) {}
  int num_slots() const override { return 2; }
  void Apply(const float* w, const float* grad, int64_t n, const OptimizerStep& step, float* const* slots,
             float* out) const override {
    float* z = slots[0];
    float* sum_sq = slots[1];  // n - n0
    const float n0 = initial_accumulator_, beta = beta_, l1 = l1_, l2 = l2_, s = step.gradient_scale;
    const float inv_alpha = 1.0f / step.learning_rate;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float g = s * grad[i];
      const float sqrt_old = std::sqrt(sum_sq[i] + n0);
      sum_sq[i] += g * g;
      const float sqrt_new = std::sqrt(sum_sq[i] + n0);
      // sqrt(n') - sqrt(n) as g^2 / (sqrt(n') + sqrt(n)): the same value
      // without the cancellation of the difference.
      const float sigma = g * g / (sqrt_new + sqrt_old) * inv_alpha;
      z[i] += g - sigma * w[i];
      const float zi = z[i];
      // -(z - sign(z) l1) as sign(-z) max(|z| - l1, 0), without a branch the
      // loop could not be vectorised with: |z| <= l1 gives a signed zero,
      // which + 0.0f makes +0.0f (a NaN z stays NaN).
      const float excess = std::fabs(zi) - l1;
      const float magnitude = excess <= 0.0f ? 0.0f : excess;
      out[i] = std::copysign(magnitude, -zi) / ((beta + sqrt_new) * inv_alpha + l2) + 0.0f;
    }
  }

 private:
  float initial_accumulator_;
  float beta_;
  float l1_;
  float l2_;
};

const bool kRegistered =
    OptimizerRegistry(DeviceKind::kCpu).Register("ftrl", [](const OptimizerConfig& c, DeviceStream) {
      return std::unique_ptr<Optimizer>(new Ftrl(c));
    });

}  // namespace
}  // namespace pstrain
