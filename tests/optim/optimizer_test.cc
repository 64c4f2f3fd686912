// CPU optimizers (optim/<name>.cc) and learning-rate schedules
// (optim/schedules/<name>.cc).
#include "optim/optimizer.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optim/lr_schedule.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

OptimizerConfig Config(const std::string& name, float lr, float momentum, float weight_decay) {
  OptimizerConfig c;
  c.set_name(name);
  c.set_learning_rate(lr);
  c.set_momentum(momentum);
  c.set_weight_decay(weight_decay);
  return c;
}

float LearningRateAt(const OptimizerConfig& config, int64_t global_step, int64_t total_steps) {
  absl::StatusOr<LearningRateSchedule> schedule = LearningRateSchedule::Create(config, total_steps);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return schedule.ok() ? schedule->At(global_step) : -1.0f;
}

std::unique_ptr<Optimizer> Make(const OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return opt.ok() ? *std::move(opt) : nullptr;
}

// Gradients of three updates; all values dyadic so the hand-computed results
// below are exact.
const std::vector<std::vector<float>> kGrads = {{0.5f, 1.0f}, {-1.0f, 0.0f}, {0.25f, -0.5f}};

TEST(SgdTest, ThreeUpdatesWithWeightDecay) {
  // w' = w - lr * (g + wd * w), lr = 0.5, wd = 0.5, w0 = [1, -2].
  std::unique_ptr<Optimizer> sgd = Make(Config("sgd", 0.5f, 0.9f, 0.5f));
  ASSERT_NE(sgd, nullptr);
  EXPECT_EQ(sgd->num_slots(), 0);
  const std::vector<std::vector<float>> expected = {{0.5f, -2.0f}, {0.875f, -1.5f}, {0.53125f, -0.875f}};
  std::vector<float> w = {1.0f, -2.0f};
  for (int k = 0; k < 3; ++k) {
    std::vector<float> out(2, 12345.0f);
    sgd->Apply(w.data(), kGrads[k].data(), 2, {.learning_rate = 0.5f}, nullptr, out.data());
    EXPECT_EQ(out, expected[k]) << "update " << k;
    w = out;
  }
}

TEST(SgdTest, NoWeightDecayAndLearningRateArgument) {
  std::unique_ptr<Optimizer> sgd = Make(Config("sgd", 123.0f, 0.0f, 0.0f));
  std::vector<float> w = {1.0f, 2.0f, 3.0f}, g = {1.0f, -1.0f, 0.5f}, out(3);
  // The learning rate passed to Apply wins (schedules live outside).
  sgd->Apply(w.data(), g.data(), 3, {.learning_rate = 0.25f}, nullptr, out.data());
  EXPECT_THAT(out, ElementsAre(0.75f, 2.25f, 2.875f));
  EXPECT_THAT(w, ElementsAre(1.0f, 2.0f, 3.0f)) << "old value must not be written";
}

TEST(MomentumTest, ThreeUpdatesWithWeightDecay) {
  // v' = m v + (g + wd w); w' = w - lr v'. m = 0.5, lr = 0.5, wd = 0.5.
  std::unique_ptr<Optimizer> mom = Make(Config("momentum", 0.5f, 0.5f, 0.5f));
  ASSERT_NE(mom, nullptr);
  EXPECT_EQ(mom->num_slots(), 1);
  const std::vector<std::vector<float>> expected_w = {{0.5f, -2.0f}, {0.625f, -1.5f}, {0.40625f, -0.625f}};
  const std::vector<std::vector<float>> expected_v = {{1.0f, 0.0f}, {-0.25f, -1.0f}, {0.4375f, -1.75f}};
  std::vector<float> w = {1.0f, -2.0f}, v = {0.0f, 0.0f};
  for (int k = 0; k < 3; ++k) {
    std::vector<float> out(2, 12345.0f);
    float* slots[] = {v.data()};
    mom->Apply(w.data(), kGrads[k].data(), 2, {.learning_rate = 0.5f}, slots, out.data());
    EXPECT_EQ(out, expected_w[k]) << "update " << k;
    EXPECT_EQ(v, expected_v[k]) << "update " << k;
    w = out;
  }
}

TEST(MomentumTest, RealisticValuesMatchDoubleReference) {
  std::unique_ptr<Optimizer> mom = Make(Config("momentum", 0.05f, 0.9f, 1e-4f));
  const int n = 257;
  std::vector<float> w(n), v(n, 0.0f);
  std::vector<double> wd(n), vd(n, 0.0);
  for (int i = 0; i < n; ++i) wd[i] = w[i] = std::sin(0.1f * i);
  for (int k = 0; k < 5; ++k) {
    std::vector<float> g(n), out(n);
    for (int i = 0; i < n; ++i) g[i] = std::cos(0.37f * i + k);
    float* slots[] = {v.data()};
    mom->Apply(w.data(), g.data(), n, {.learning_rate = 0.05f}, slots, out.data());
    for (int i = 0; i < n; ++i) {
      vd[i] = static_cast<double>(0.9f) * vd[i] + (g[i] + static_cast<double>(1e-4f) * wd[i]);
      wd[i] = wd[i] - static_cast<double>(0.05f) * vd[i];
    }
    w = out;
  }
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(w[i], wd[i], 1e-5) << i;
    EXPECT_NEAR(v[i], vd[i], 1e-4) << i;
  }
}

// Elementwise: two calls over consecutive ranges (slots offset to the range)
// equal one call over the whole variable.
TEST(MomentumTest, SplitRangesEqualOneCall) {
  std::unique_ptr<Optimizer> mom = Make(Config("momentum", 0.1f, 0.9f, 0.01f));
  const int n = 1000, split = 333;
  std::vector<float> w(n), g(n);
  for (int i = 0; i < n; ++i) {
    w[i] = 0.01f * (i % 50) - 0.2f;
    g[i] = 0.003f * (i % 77) - 0.1f;
  }
  std::vector<float> v_whole(n, 0.0f), v_split(n, 0.0f);
  std::vector<float> w_whole = w, w_split = w;
  for (int k = 0; k < 3; ++k) {
    std::vector<float> out_whole(n), out_split(n);
    float* s_whole[] = {v_whole.data()};
    mom->Apply(w_whole.data(), g.data(), n, {.learning_rate = 0.1f}, s_whole, out_whole.data());
    float* s_first[] = {v_split.data()};
    mom->Apply(w_split.data(), g.data(), split, {.learning_rate = 0.1f}, s_first, out_split.data());
    float* s_second[] = {v_split.data() + split};
    mom->Apply(w_split.data() + split, g.data() + split, n - split, {.learning_rate = 0.1f}, s_second,
               out_split.data() + split);
    EXPECT_EQ(out_split, out_whole) << "update " << k;
    EXPECT_EQ(v_split, v_whole) << "update " << k;
    w_whole = out_whole;
    w_split = out_split;
  }
}

// The gradient scale is applied inside the update: scaling by s equals
// updating with s * g computed beforehand, exactly, for every optimizer.
TEST(OptimizerTest, GradientScaleEqualsAPrescaledGradient) {
  for (const char* name : {"sgd", "momentum"}) {
    std::unique_ptr<Optimizer> opt = Make(Config(name, 0.05f, 0.9f, 1e-4f));
    const int n = 513;
    std::vector<float> w(n), g(n), prescaled(n);
    for (int i = 0; i < n; ++i) {
      w[i] = std::sin(0.3f * i);
      g[i] = std::cos(0.11f * i) * 3.0f;
      prescaled[i] = 0.25f * g[i];
    }
    std::vector<float> v_scaled(n, 0.0f), v_pre(n, 0.0f), w_scaled = w, w_pre = w;
    for (int k = 0; k < 3; ++k) {
      float* s1[] = {v_scaled.data()};
      float* s2[] = {v_pre.data()};
      opt->Apply(w_scaled.data(), g.data(), n, {.learning_rate = 0.05f, .gradient_scale = 0.25f}, s1, w_scaled.data());
      opt->Apply(w_pre.data(), prescaled.data(), n, {.learning_rate = 0.05f}, s2, w_pre.data());
    }
    EXPECT_EQ(w_scaled, w_pre) << name;
    EXPECT_EQ(v_scaled, v_pre) << name;
  }
}

TEST(OptimizerRegistryTest, UnknownOptimizerListsKnownOnes) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(Config("adamw", 0.1f, 0.9f, 0.0f));
  ASSERT_FALSE(opt.ok());
  EXPECT_EQ(opt.status().code(), absl::StatusCode::kNotFound);
  const std::string message(opt.status().message());
  EXPECT_THAT(message, HasSubstr("adamw"));
  EXPECT_THAT(message, HasSubstr("sgd"));
  EXPECT_THAT(message, HasSubstr("momentum"));
}

TEST(OptimizerRegistryTest, DefaultConfigIsMomentum) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(OptimizerConfig());
  ASSERT_TRUE(opt.ok()) << opt.status();
  EXPECT_EQ((*opt)->num_slots(), 1);
}

TEST(LearningRateTest, UnknownScheduleListsKnownOnes) {
  OptimizerConfig c;
  c.set_lr_schedule("linear");
  absl::StatusOr<LearningRateSchedule> schedule = LearningRateSchedule::Create(c, 100);
  ASSERT_FALSE(schedule.ok());
  EXPECT_EQ(schedule.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(schedule.status().message(), HasSubstr("unknown lr_schedule 'linear'; known: constant, cosine, step"));
}

TEST(LearningRateTest, Constant) {
  OptimizerConfig c;
  c.set_learning_rate(0.3f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 0, 100), 0.3f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 99, 100), 0.3f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 1000, 0), 0.3f);
}

TEST(LearningRateTest, Step) {
  OptimizerConfig c;
  c.set_learning_rate(1.0f);
  c.set_lr_schedule("step");
  c.set_lr_decay_factor(0.5f);
  c.set_lr_decay_steps(10);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 0, 100), 1.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 9, 100), 1.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 10, 100), 0.5f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 19, 100), 0.5f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 25, 100), 0.25f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 30, 0), 0.125f);  // independent of total steps
  // decay_steps 0: no decay.
  c.set_lr_decay_steps(0);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 50, 100), 1.0f);
}

TEST(LearningRateTest, Cosine) {
  OptimizerConfig c;
  c.set_learning_rate(2.0f);
  c.set_lr_schedule("cosine");
  EXPECT_FLOAT_EQ(LearningRateAt(c, 0, 100), 2.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 50, 100), 1.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 25, 100), static_cast<float>(1.0 + std::cos(M_PI / 4)));
  EXPECT_FLOAT_EQ(LearningRateAt(c, 75, 100), static_cast<float>(1.0 + std::cos(3 * M_PI / 4)));
  EXPECT_NEAR(LearningRateAt(c, 100, 100), 0.0f, 1e-6);
  EXPECT_NEAR(LearningRateAt(c, 150, 100), 0.0f, 1e-6);  // clamped past the end
  // Unknown total: the base rate.
  EXPECT_FLOAT_EQ(LearningRateAt(c, 50, 0), 2.0f);
  // Monotonically non-increasing over the run.
  float prev = LearningRateAt(c, 0, 40);
  for (int u = 1; u <= 40; ++u) {
    float lr = LearningRateAt(c, u, 40);
    EXPECT_LE(lr, prev) << u;
    prev = lr;
  }
}

}  // namespace
}  // namespace pstrain
