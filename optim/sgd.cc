// Plain SGD with optional L2 weight decay: w' = w - lr * (g + wd * w).
// (CUDA: optim/cuda/sgd.cc.)
#include "optim/optimizer.h"

namespace pstrain {
namespace {

class Sgd : public Optimizer {
 public:
  explicit Sgd(const OptimizerConfig& config) : weight_decay_(config.weight_decay()) {}
  int num_slots() const override { return 0; }
  void Apply(const float* w, const float* g, int64_t n, float lr, float* const* slots, float* out) const override {
    const float wd = weight_decay_;
    for (int64_t i = 0; i < n; ++i) out[i] = w[i] - lr * (g[i] + wd * w[i]);
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
