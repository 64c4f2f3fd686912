// The CPU optimizers with per-element accumulators (optim/adagrad.cc,
// optim/ftrl.cc, optim/adam.cc) against double-precision references written
// here from their formulas, and the properties every optimizer must have
// (in-place updates, split ranges, the gradient scale).
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optim/optimizer.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Optimizer> Make(const OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return opt.ok() ? *std::move(opt) : nullptr;
}

OptimizerConfig Named(const std::string& name) {
  OptimizerConfig c;
  c.set_name(name);
  return c;
}

// A variable, its gradients and its slots, in float as the optimizers keep
// them.
struct State {
  std::vector<float> w;
  std::vector<std::vector<float>> slots;
  std::vector<float*> SlotPointers(int64_t offset = 0) {
    std::vector<float*> p;
    for (std::vector<float>& s : slots) p.push_back(s.data() + offset);
    return p;
  }
};

State Start(const Optimizer& opt, int n) {
  State s;
  s.w.resize(n);
  for (int i = 0; i < n; ++i) s.w[i] = 0.5f * std::sin(0.1f * i + 0.3f);
  s.slots.assign(opt.num_slots(), std::vector<float>(n, 0.0f));
  return s;
}

// Update k's gradient: mixed signs and magnitudes over [-3, 3], some exact 0.
std::vector<float> Grad(int n, int k) {
  std::vector<float> g(n);
  for (int i = 0; i < n; ++i) g[i] = i % 17 == 5 ? 0.0f : 3.0f * std::cos(0.37f * i + 1.3f * k);
  return g;
}

// Applies `updates` updates in place; update k has updates_before k.
void RunUpdates(const Optimizer& opt, State& s, int updates, float lr, float scale = 1.0f) {
  const int n = static_cast<int>(s.w.size());
  for (int k = 0; k < updates; ++k) {
    const std::vector<float> g = Grad(n, k);
    std::vector<float*> slots = s.SlotPointers();
    opt.Apply(s.w.data(), g.data(), n, {.learning_rate = lr, .gradient_scale = scale, .updates_before = k},
              slots.data(), s.w.data());
  }
}

// One element's double-precision reference: (w, gradient, update k) -> w'.
using Reference = std::function<double(double w, double g, int k)>;

void ExpectMatchesReference(const Optimizer& opt, float lr, float scale, int updates,
                            const std::function<Reference()>& make_reference) {
  const int n = 301;
  State s = Start(opt, n);
  const State start = s;
  RunUpdates(opt, s, updates, lr, scale);
  for (int i = 0; i < n; ++i) {
    Reference ref = make_reference();  // fresh per-element state
    double w = start.w[i];
    for (int k = 0; k < updates; ++k) w = ref(w, static_cast<double>(scale) * Grad(n, k)[i], k);
    ASSERT_NEAR(s.w[i], w, 1e-6 * std::max(1.0, std::fabs(w))) << "element " << i;
  }
}

OptimizerConfig AdagradConfig() {
  OptimizerConfig c = Named("adagrad");
  c.set_initial_accumulator(0.1f);
  c.set_weight_decay(0.01f);
  return c;
}

OptimizerConfig FtrlConfig(float l1) {
  OptimizerConfig c = Named("ftrl");
  c.set_initial_accumulator(0.1f);
  c.set_ftrl_beta(1.0f);
  c.set_l1(l1);
  c.set_l2(0.5f);
  c.set_weight_decay(0.25f);  // ftrl ignores it (l2 is its own)
  return c;
}

OptimizerConfig AdamConfig() {
  OptimizerConfig c = Named("adam");
  c.set_beta1(0.9f);
  c.set_beta2(0.999f);
  c.set_epsilon(1e-8f);
  c.set_weight_decay(0.01f);
  return c;
}

// Every optimizer here, configured as the tests use it.
const std::vector<OptimizerConfig>& AllConfigs() {
  static const auto* configs = new std::vector<OptimizerConfig>{AdagradConfig(), FtrlConfig(0.05f), AdamConfig()};
  return *configs;
}

TEST(AdagradTest, MatchesDoubleReference) {
  const OptimizerConfig c = AdagradConfig();
  std::unique_ptr<Optimizer> opt = Make(c);
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->num_slots(), 1);
  const double lr = 0.1f, wd = c.weight_decay();
  ExpectMatchesReference(*opt, 0.1f, 1.0f, 6, [&] {
    return [acc = static_cast<double>(c.initial_accumulator()), lr, wd](double w, double grad, int) mutable {
      const double g = grad + wd * w;
      acc += g * g;
      return w - lr * g / std::sqrt(acc);
    };
  });
}

TEST(FtrlTest, MatchesDoubleReference) {
  const OptimizerConfig c = FtrlConfig(0.05f);
  std::unique_ptr<Optimizer> opt = Make(c);
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->num_slots(), 2);
  const double alpha = 0.2f, beta = c.ftrl_beta(), l1 = c.l1(), l2 = c.l2();
  ExpectMatchesReference(*opt, 0.2f, 1.0f, 6, [&] {
    return [n = static_cast<double>(c.initial_accumulator()), z = 0.0, alpha, beta, l1, l2](double w, double g,
                                                                                            int) mutable {
      const double sigma = (std::sqrt(n + g * g) - std::sqrt(n)) / alpha;
      z += g - sigma * w;
      n += g * g;
      if (std::fabs(z) <= l1) return 0.0;
      return -(z - (z < 0 ? -l1 : l1)) / ((beta + std::sqrt(n)) / alpha + l2);
    };
  });
}

TEST(AdamTest, MatchesDoubleReference) {
  const OptimizerConfig c = AdamConfig();
  std::unique_ptr<Optimizer> opt = Make(c);
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->num_slots(), 2);
  const double lr = 0.01f, b1 = c.beta1(), b2 = c.beta2(), eps = c.epsilon(), wd = c.weight_decay();
  ExpectMatchesReference(*opt, 0.01f, 1.0f, 6, [&] {
    return [m = 0.0, v = 0.0, lr, b1, b2, eps, wd](double w, double grad, int k) mutable {
      const double g = grad + wd * w;
      const int t = k + 1;
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g * g;
      return w - lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t)) * m / (std::sqrt(v) + eps);
    };
  });
}

// updates_before is the row's own count: a later first update of a row (lazy
// Adam on an embedding table) is bias-corrected as a first update.
TEST(AdamTest, BiasCorrectionFollowsUpdatesBefore) {
  std::unique_ptr<Optimizer> opt = Make(AdamConfig());
  const std::vector<float> g = {0.5f};
  std::vector<float> w_first = {1.0f}, w_late = {1.0f}, m1 = {0.0f}, v1 = {0.0f}, m2 = {0.0f}, v2 = {0.0f};
  float* s1[] = {m1.data(), v1.data()};
  float* s2[] = {m2.data(), v2.data()};
  opt->Apply(w_first.data(), g.data(), 1, {.learning_rate = 0.1f}, s1, w_first.data());
  opt->Apply(w_late.data(), g.data(), 1, {.learning_rate = 0.1f, .updates_before = 1000}, s2, w_late.data());
  EXPECT_NEAR(w_first[0], 0.9f, 1e-6);
  // t = 1001: sqrt(1 - b2^t) / (1 - b1^t) ~ 0.795, m / sqrt(v) = 0.1 / sqrt(0.001).
  const double corr = std::sqrt(1 - std::pow(0.999, 1001)) / (1 - std::pow(0.9, 1001));
  EXPECT_NEAR(w_late[0], 1.0 - 0.1 * corr * (0.1 * 0.5) / std::sqrt(0.001 * 0.25), 1e-5);
}

// Writing into the old value's buffer gives what writing elsewhere gives.
TEST(RowOptimizersTest, InPlaceEqualsSeparateBuffers) {
  for (const OptimizerConfig& c : AllConfigs()) {
    std::unique_ptr<Optimizer> opt = Make(c);
    const int n = 129;
    State in_place = Start(*opt, n), separate = in_place;
    for (int k = 0; k < 4; ++k) {
      const std::vector<float> g = Grad(n, k);
      const OptimizerStep step{.learning_rate = 0.05f, .updates_before = k};
      std::vector<float*> a = in_place.SlotPointers(), b = separate.SlotPointers();
      opt->Apply(in_place.w.data(), g.data(), n, step, a.data(), in_place.w.data());
      std::vector<float> out(n, 12345.0f);
      const std::vector<float> old = separate.w;
      opt->Apply(separate.w.data(), g.data(), n, step, b.data(), out.data());
      EXPECT_EQ(separate.w, old) << c.name() << ": the old value must not be written";
      separate.w = out;
    }
    EXPECT_EQ(in_place.w, separate.w) << c.name();
    EXPECT_EQ(in_place.slots, separate.slots) << c.name();
  }
}

// Elementwise: two calls over consecutive ranges (slots offset to the range)
// equal one call over the whole variable.
TEST(RowOptimizersTest, SplitRangesEqualOneCall) {
  for (const OptimizerConfig& c : AllConfigs()) {
    std::unique_ptr<Optimizer> opt = Make(c);
    const int n = 1000, split = 333;
    State whole = Start(*opt, n), parts = whole;
    for (int k = 0; k < 4; ++k) {
      const std::vector<float> g = Grad(n, k);
      const OptimizerStep step{.learning_rate = 0.05f, .updates_before = k};
      std::vector<float*> sw = whole.SlotPointers(), s1 = parts.SlotPointers(), s2 = parts.SlotPointers(split);
      opt->Apply(whole.w.data(), g.data(), n, step, sw.data(), whole.w.data());
      opt->Apply(parts.w.data(), g.data(), split, step, s1.data(), parts.w.data());
      opt->Apply(parts.w.data() + split, g.data() + split, n - split, step, s2.data(), parts.w.data() + split);
    }
    EXPECT_EQ(parts.w, whole.w) << c.name();
    EXPECT_EQ(parts.slots, whole.slots) << c.name();
  }
}

// The gradient scale is applied inside the update: scaling by a power of two
// (exact in float) equals updating with the prescaled gradient, exactly; and
// the result matches the reference with the scale (MatchesDoubleReference's
// formulas are checked there).
TEST(RowOptimizersTest, GradientScaleEqualsAPrescaledGradient) {
  for (const OptimizerConfig& c : AllConfigs()) {
    std::unique_ptr<Optimizer> opt = Make(c);
    const int n = 257;
    State scaled = Start(*opt, n), prescaled = scaled;
    for (int k = 0; k < 4; ++k) {
      const std::vector<float> g = Grad(n, k);
      std::vector<float> pre(n);
      for (int i = 0; i < n; ++i) pre[i] = 0.25f * g[i];
      std::vector<float*> a = scaled.SlotPointers(), b = prescaled.SlotPointers();
      opt->Apply(scaled.w.data(), g.data(), n, {.learning_rate = 0.05f, .gradient_scale = 0.25f, .updates_before = k},
                 a.data(), scaled.w.data());
      opt->Apply(prescaled.w.data(), pre.data(), n, {.learning_rate = 0.05f, .updates_before = k}, b.data(),
                 prescaled.w.data());
    }
    EXPECT_EQ(scaled.w, prescaled.w) << c.name();
    EXPECT_EQ(scaled.slots, prescaled.slots) << c.name();
    State unscaled = Start(*opt, n);
    RunUpdates(*opt, unscaled, 4, 0.05f);
    EXPECT_NE(scaled.w, unscaled.w) << c.name() << ": the scale must change the update";
  }
}

// A scale that is not a power of two against the double reference.
TEST(RowOptimizersTest, GradientScaleMatchesReference) {
  const OptimizerConfig c = AdagradConfig();
  std::unique_ptr<Optimizer> opt = Make(c);
  const double lr = 0.1f, wd = c.weight_decay();
  ExpectMatchesReference(*opt, 0.1f, 0.3f, 4, [&] {
    return [acc = static_cast<double>(c.initial_accumulator()), lr, wd](double w, double grad, int) mutable {
      const double g = grad + wd * w;
      acc += g * g;
      return w - lr * g / std::sqrt(acc);
    };
  });
}

// An l1 above every |z| the updates accumulate leaves each weight exactly
// 0.0f, whatever it started at; a small l1 does not.
TEST(FtrlTest, L1AboveAccumulatedGradientKeepsWeightsExactlyZero) {
  const int n = 64;
  for (float l1 : {100.0f, 0.01f}) {
    std::unique_ptr<Optimizer> opt = Make(FtrlConfig(l1));
    State s = Start(*opt, n);
    RunUpdates(*opt, s, 5, 0.1f);
    int zeros = 0, z_above_l1 = 0;
    for (int i = 0; i < n; ++i) {
      zeros += s.w[i] == 0.0f && !std::signbit(s.w[i]);
      z_above_l1 += std::fabs(s.slots[0][i]) > l1;
    }
    if (l1 == 100.0f) {
      EXPECT_EQ(z_above_l1, 0) << "the test's premise: |z| stays below l1";
      EXPECT_EQ(zeros, n) << "l1 " << l1;
    } else {
      EXPECT_GT(z_above_l1, n / 2);
      EXPECT_LT(zeros, n / 2) << "l1 " << l1;
    }
  }
}

// Adam's first update moves each weight by about lr * sign(g), whatever |g|
// (bias-corrected m / sqrt(v) is g / |g| when epsilon is negligible).
TEST(AdamTest, FirstStepMovesEachWeightByTheLearningRate) {
  OptimizerConfig c = AdamConfig();
  c.set_weight_decay(0);
  std::unique_ptr<Optimizer> opt = Make(c);
  const std::vector<float> w = {1.0f, -2.0f, 0.5f, 3.0f}, g = {0.1f, -50.0f, 0.7f, -2.0f};
  std::vector<float> out(4), m(4, 0.0f), v(4, 0.0f);
  float* slots[] = {m.data(), v.data()};
  opt->Apply(w.data(), g.data(), 4, {.learning_rate = 0.01f}, slots, out.data());
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(out[i] - w[i], g[i] > 0 ? -0.01f : 0.01f, 1e-6) << i;
  }
}

// Adagrad's step for the same gradient shrinks as the accumulator grows:
// lr * g / sqrt(a0 + k g^2) at update k.
TEST(AdagradTest, EffectiveStepShrinksAsTheAccumulatorGrows) {
  OptimizerConfig c = AdagradConfig();
  c.set_weight_decay(0);
  std::unique_ptr<Optimizer> opt = Make(c);
  const std::vector<float> g = {0.5f};
  std::vector<float> w = {0.0f}, acc = {0.0f};
  float* slots[] = {acc.data()};
  float previous_step = INFINITY;
  for (int k = 1; k <= 5; ++k) {
    const float before = w[0];
    opt->Apply(w.data(), g.data(), 1, {.learning_rate = 0.1f}, slots, w.data());
    const float step = before - w[0];
    EXPECT_GT(step, 0.0f) << k;
    EXPECT_LT(step, previous_step) << k;
    EXPECT_NEAR(step, 0.1 * 0.5 / std::sqrt(0.1 + k * 0.25), 1e-6) << k;
    previous_step = step;
  }
  // The slot holds the accumulator's offset from initial_accumulator.
  EXPECT_FLOAT_EQ(acc[0], 5 * 0.25f);
}

// Slots start at zero: the first adagrad update divides by
// sqrt(initial_accumulator + g^2), not sqrt(g^2).
TEST(AdagradTest, ZeroSlotMeansInitialAccumulator) {
  OptimizerConfig c = AdagradConfig();
  c.set_weight_decay(0);
  c.set_initial_accumulator(3.0f);
  std::unique_ptr<Optimizer> opt = Make(c);
  const std::vector<float> g = {1.0f, 0.0f};
  std::vector<float> w = {1.0f, 1.0f}, acc = {0.0f, 0.0f};
  float* slots[] = {acc.data()};
  opt->Apply(w.data(), g.data(), 2, {.learning_rate = 1.0f}, slots, w.data());
  EXPECT_FLOAT_EQ(w[0], 0.5f);  // 1 - 1 * 1 / sqrt(3 + 1)
  EXPECT_EQ(w[1], 1.0f);        // g == 0: no move, no NaN
}

TEST(RowOptimizersRegistryTest, CreatesEachByName) {
  for (const char* name : {"adagrad", "ftrl", "adam"}) {
    absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(Named(name));
    ASSERT_TRUE(opt.ok()) << name << ": " << opt.status();
    EXPECT_EQ((*opt)->num_slots(), std::string(name) == "adagrad" ? 1 : 2) << name;
  }
}

TEST(RowOptimizersRegistryTest, UnknownNameListsTheNewOnes) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(Named("adamw"));
  ASSERT_FALSE(opt.ok());
  EXPECT_EQ(opt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(opt.status().message(),
              HasSubstr("unknown optimizer 'adamw'; known: adagrad, adam, ftrl, momentum, sgd"));
}

}  // namespace
}  // namespace pstrain
