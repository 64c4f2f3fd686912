// EmulatedModel: the real model's variables, the hooks in the real model's
// order at the modelled times, no math.
#include "models/emulated_model.h"

#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "device/device_context.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

class EmulatedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ctx = CreateDeviceContext(Device::Cpu());
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_ = *std::move(ctx);
  }
  std::unique_ptr<Model> Lenet() {
    ModelConfig config;
    config.set_name("lenet");
    config.add_input_shape(1);
    config.add_input_shape(28);
    config.add_input_shape(28);
    config.set_num_classes(10);
    auto model = CreateModel(config, ctx_.get());
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *std::move(model) : nullptr;
  }
  std::unique_ptr<DeviceContext> ctx_;
};

TEST_F(EmulatedModelTest, ReleasesGradientsInTheRealOrderAtTheModelledTimes) {
  // The order the real model finalises its gradients in.
  std::unique_ptr<Model> real = Lenet();
  ASSERT_NE(real, nullptr);
  Tensor images({4, 1, 28, 28});
  std::vector<int32_t> labels = {0, 1, 2, 3};
  std::vector<int> real_order;
  real->InitializeVariables(1);
  real->TrainStep(images, labels.data(), [&](int v) { real_order.push_back(v); });

  const EmulatedCompute compute{absl::Milliseconds(60), absl::Milliseconds(120)};
  EmulatedModel emulated(Lenet(), compute);
  EXPECT_EQ(emulated.variables().size(), real->variables().size());
  const std::vector<absl::Duration> schedule = emulated.BackwardSchedule();
  ASSERT_EQ(schedule.size(), emulated.LayerCosts().size());
  for (size_t i = 1; i < schedule.size(); ++i) EXPECT_GE(schedule[i], schedule[i - 1]);
  EXPECT_EQ(schedule.back(), compute.backward);

  std::vector<int> order;
  std::vector<absl::Duration> when;
  const absl::Time start = absl::Now();
  const float loss = emulated.TrainStep(images, labels.data(), [&](int v) {
    order.push_back(v);
    when.push_back(absl::Now() - start);
  });
  const absl::Duration step = absl::Now() - start;
  EXPECT_EQ(order, real_order);
  EXPECT_FLOAT_EQ(loss, std::log(10.0f));
  // Never early: the first gradient comes after the forward pass, the step
  // lasts at least forward + backward. (Sleeping may overshoot; not asserted.)
  ASSERT_FALSE(when.empty());
  EXPECT_GE(when.front(), compute.forward);
  EXPECT_GE(step, compute.forward + compute.backward);
  // No math: the gradients stay zero.
  for (const Variable& v : emulated.variables()) {
    for (int64_t i = 0; i < v.grad.num_elements(); ++i) ASSERT_EQ(v.grad.data()[i], 0.0f) << v.name;
  }
}

// A byte scale (--byte_scale): the same variables by name and order, each a flat
// quarter of the real one (rounded up), holding its first values, gradients
// zero; InitializeVariables follows the real model's.
TEST_F(EmulatedModelTest, AByteScaleKeepsEachVariableAsAFlatShareOfItsElements) {
  std::unique_ptr<Model> real = Lenet();
  ASSERT_NE(real, nullptr);
  real->InitializeVariables(7);
  EmulatedModel emulated(Lenet(), EmulatedCompute{absl::Milliseconds(1), absl::Milliseconds(2)}, 4);
  emulated.InitializeVariables(7);
  ASSERT_EQ(emulated.variables().size(), real->variables().size());
  int64_t real_elements = 0;
  int64_t scaled_elements = 0;
  for (size_t i = 0; i < real->variables().size(); ++i) {
    const Variable& r = real->variables()[i];
    const Variable& v = emulated.variables()[i];
    EXPECT_EQ(v.name, r.name);
    const int64_t n = r.value.num_elements();
    ASSERT_EQ(v.value.num_elements(), (n + 3) / 4) << v.name;
    EXPECT_EQ(v.value.shape().size(), 1u) << v.name;
    for (int64_t e = 0; e < v.value.num_elements(); ++e) ASSERT_EQ(v.value.data()[e], r.value.data()[e]) << v.name;
    for (int64_t e = 0; e < v.grad.num_elements(); ++e) ASSERT_EQ(v.grad.data()[e], 0.0f) << v.name;
    real_elements += n;
    scaled_elements += v.value.num_elements();
  }
  EXPECT_NEAR(static_cast<double>(scaled_elements) / real_elements, 0.25, 0.01);
  // The step releases every variable as without the scale.
  Tensor images({2, 1, 28, 28});
  std::vector<int32_t> labels = {0, 1};
  std::vector<int> released;
  emulated.TrainStep(images, labels.data(), [&](int v) { released.push_back(v); });
  EXPECT_EQ(released.size(), emulated.variables().size());
}

// Compute lost to a collective on the device pushes the rest of backward
// later: what is owed before the step is dropped, what accrues during
// backward is added to every later deadline.
TEST_F(EmulatedModelTest, ComputeOwedToOtherWorkDelaysTheRestOfBackward) {
  const EmulatedCompute compute{absl::Milliseconds(20), absl::Milliseconds(40)};
  EmulatedModel emulated(Lenet(), compute);
  int calls = 0;
  emulated.SetComputeDelay([&] {
    // The first call of the step clears what was owed before it: a large
    // figure here must not count.
    return calls++ == 0 ? absl::Seconds(10) : absl::Milliseconds(30);
  });
  Tensor images({4, 1, 28, 28});
  std::vector<int32_t> labels = {0, 1, 2, 3};
  std::vector<absl::Duration> when;
  const absl::Time start = absl::Now();
  emulated.TrainStep(images, labels.data(), [&](int) { when.push_back(absl::Now() - start); });
  const absl::Duration step = absl::Now() - start;
  // One clearing call, then one per released layer and one at the end,
  // each owing 30 ms more.
  ASSERT_GE(calls, 3);
  EXPECT_GE(step, compute.forward + compute.backward + (calls - 1) * absl::Milliseconds(30));
  EXPECT_LT(step, absl::Seconds(10));  // the owed-before figure was dropped
  ASSERT_FALSE(when.empty());
  EXPECT_GE(when.front(), compute.forward + absl::Milliseconds(30));
}

TEST_F(EmulatedModelTest, ConvolutionsTakeTheirShareOfBackward) {
  EmulatedModel emulated(Lenet(), EmulatedCompute{absl::ZeroDuration(), absl::Seconds(1)});
  const std::vector<LayerCost> layers = emulated.LayerCosts();
  const std::vector<absl::Duration> schedule = emulated.BackwardSchedule();
  int64_t total = 0;
  for (const LayerCost& l : layers) total += l.forward_flops_per_example;
  ASSERT_GT(total, 0);
  // The last layer (backward's first) finishes at its FLOP share.
  EXPECT_NEAR(absl::ToDoubleSeconds(schedule.front()),
              static_cast<double>(layers.back().forward_flops_per_example) / total, 1e-9);
}

// With a variable wait, forward waits for each layer's variables in
// forward order, and a late variable delays the layers from its own on: the
// first layer's weights arriving late push the whole modelled forward past
// the arrival.
TEST_F(EmulatedModelTest, ForwardStartsEachLayerWhenItsVariablesHaveArrived) {
  const EmulatedCompute compute{absl::Milliseconds(40), absl::Milliseconds(40)};
  EmulatedModel emulated(Lenet(), compute);
  const std::vector<LayerCost> layers = emulated.LayerCosts();
  std::vector<int> expected;
  for (const LayerCost& layer : layers) expected.insert(expected.end(), layer.variables.begin(), layer.variables.end());
  ASSERT_FALSE(expected.empty());
  const int first = expected.front();
  const absl::Duration late = absl::Milliseconds(150);
  std::vector<int> waited;
  absl::Time start;
  emulated.SetVariableWait([&](int v) {
    waited.push_back(v);
    if (v == first) absl::SleepFor(start + late - absl::Now());  // the first layer's weights arrive late
  });
  Tensor images({4, 1, 28, 28});
  std::vector<int32_t> labels = {0, 1, 2, 3};
  absl::Duration first_gradient = absl::InfiniteDuration();
  start = absl::Now();
  emulated.TrainStep(images, labels.data(),
                     [&](int) { first_gradient = std::min(first_gradient, absl::Now() - start); });
  EXPECT_EQ(waited, expected);
  // Backward starts only after every layer ran from the arrival on.
  EXPECT_GE(first_gradient, late + compute.forward);
  // Without waits the forward takes its modelled time only (not asserted
  // from above: sleeping may overshoot).
  emulated.SetVariableWait(nullptr);
  first_gradient = absl::InfiniteDuration();
  start = absl::Now();
  emulated.TrainStep(images, labels.data(),
                     [&](int) { first_gradient = std::min(first_gradient, absl::Now() - start); });
  EXPECT_GE(first_gradient, compute.forward);
}

}  // namespace
}  // namespace pstrain
