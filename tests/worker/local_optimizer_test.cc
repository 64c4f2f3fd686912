// LocalOptimizer's learning-rate scale (the elastic all-reduce's
// elastic.scale_learning_rate: lr x members / listed workers): an update
// at scale s equals one at a learning rate s times the config's, slots
// included, for SGD with momentum and for Adam.
#include "worker/local_optimizer.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::vector<Variable> Variables(float value, float grad) {
  Variable v;
  v.value = Tensor({4, 3});
  v.grad = Tensor({4, 3});
  for (int64_t i = 0; i < 12; ++i) {
    v.value.data()[i] = value + 0.1f * i;
    v.grad.data()[i] = grad + 0.05f * i;
  }
  return {v};
}

void ExpectScaleEqualsRate(const std::string& optimizer) {
  OptimizerConfig scaled_config, rate_config;
  scaled_config.set_name(optimizer);
  scaled_config.set_learning_rate(0.1f);
  rate_config.set_name(optimizer);
  rate_config.set_learning_rate(0.04f);
  std::vector<Variable> a = Variables(1.0f, 0.3f), b = Variables(1.0f, 0.3f), unscaled = Variables(1.0f, 0.3f);
  absl::StatusOr<std::unique_ptr<LocalOptimizer>> scaled = LocalOptimizer::Create(scaled_config, a, 10);
  absl::StatusOr<std::unique_ptr<LocalOptimizer>> at_rate = LocalOptimizer::Create(rate_config, b, 10);
  absl::StatusOr<std::unique_ptr<LocalOptimizer>> plain = LocalOptimizer::Create(scaled_config, unscaled, 10);
  ASSERT_TRUE(scaled.ok() && at_rate.ok() && plain.ok());
  for (int step = 0; step < 3; ++step) {
    (*scaled)->Apply(a, step, 0.5f, /*learning_rate_scale=*/0.4f);
    (*at_rate)->Apply(b, step, 0.5f);
    (*plain)->Apply(unscaled, step, 0.5f);
  }
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_FLOAT_EQ(a[0].value.data()[i], b[0].value.data()[i]) << optimizer << " element " << i;
    EXPECT_NE(a[0].value.data()[i], unscaled[0].value.data()[i]) << optimizer << " element " << i;
  }
}

TEST(LocalOptimizerTest, ALearningRateScaleEqualsTheScaledRate) {
  ExpectScaleEqualsRate("momentum");
  ExpectScaleEqualsRate("adam");
}

}  // namespace
}  // namespace pstrain
