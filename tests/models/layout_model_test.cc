// A model whose activations stay in oneDNN's blocked formats between layers
// (conv -> bn -> relu -> conv -> add(skip) -> pool -> dense), checked end to
// end through the Model API: TrainStep's variable gradients against finite
// differences of TrainStep's loss (training mode throughout, so batch norm
// uses batch statistics on both sides). The chain also exercises the
// model's batch_norm+relu fusion and its gradient-buffer sharing through add;
// the diamond test, sharing that must be refused; the deep chain, the
// memory plan (buffers whose bytes serve another once nothing reads them).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "models/model.h"

namespace pstrain {
namespace {

class LayoutModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ctx = CreateDeviceContext(Device::Cpu());
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_ = std::move(*ctx);
  }

  // input [4, 6, 6] -> conv1 [8, 6, 6] -> bn1 -> relu1 -> conv2 [8, 6, 6]
  //   -> add(conv2, relu1) -> pool [8, 3, 3] -> logits [3]
  // `smooth` swaps relu for nothing and max for average pooling.
  std::unique_ptr<Model> Build(bool smooth = false) {
    ModelBuilder b("blocked_chain", {4, 6, 6}, 3, ctx_.get());
    b.Then("conv1", LayerSpec{"conv2d"}.Int("filters", 8).Int("kernel", 3).Int("padding", 1));
    int relu1 = b.Then("bn1", LayerSpec{"batch_norm"});
    if (!smooth) relu1 = b.Then("relu1", LayerSpec{"relu"});
    int conv2 =
        b.Then("conv2", LayerSpec{"conv2d"}.Int("filters", 8).Int("kernel", 3).Int("padding", 1).Int("bias", 0));
    b.Add("skip", LayerSpec{"add"}, {conv2, relu1});
    b.Then("pool", LayerSpec{smooth ? "avg_pool" : "max_pool"}.Int("kernel", 2));
    auto model = b.Finish(b.Then("logits", LayerSpec{"dense"}.Int("units", 3)));
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? std::move(*model) : nullptr;
  }

  // The rounding noise of TrainStep's float loss, as the standard deviation
  // sigma of one evaluation's error. Every layer computes in float, in an
  // order that depends on the processor's kernels (AVX-512, AVX2 and SSE4.1
  // sum differently), and the loss itself is a float (a loss near 1 moves in
  // steps of 1.2e-7), so it is measured, not assumed: second differences
  // L(x+t) - 2 L(x) + L(x-t) over a step t = h / 16 are noise alone (their
  // curvature term f'' t^2 lies orders of magnitude below it), with variance
  // 6 sigma^2 for independent errors. The largest 5% are left out: steps that
  // cross a kink (relu, max pooling) are curvature, not noise.
  static double LossNoise(Model& model, const Tensor& images, const int32_t* labels, double h) {
    const double t = h / 16;
    std::vector<double> second;
    const double at = model.TrainStep(images, labels, nullptr);
    for (size_t i = 0; i < model.variables().size(); ++i) {
      Tensor value = model.variables()[i].value;
      for (int64_t j = i % 5; j < value.num_elements(); j += 37) {
        float& v = value.data()[j];
        const float saved = v;
        v = static_cast<float>(saved + t);
        const double plus = model.TrainStep(images, labels, nullptr);
        v = static_cast<float>(saved - t);
        const double minus = model.TrainStep(images, labels, nullptr);
        v = saved;
        second.push_back(std::fabs(plus - 2 * at + minus));
      }
    }
    std::sort(second.begin(), second.end());
    second.resize(second.size() - second.size() / 20);
    double sum_of_squares = 0;
    for (double d : second) sum_of_squares += d * d;
    return std::sqrt(sum_of_squares / second.size() / 6);
  }

  // Checks every variable's TrainStep gradient (every `stride`th element)
  // against central differences of TrainStep's loss (step h). The numeric
  // derivative carries the loss's rounding noise divided by the step: with
  // sigma per evaluation (LossNoise), (n+ - n-) / 2h has standard deviation
  // sigma / (sqrt(2) h). An element agrees when
  //   |analytic - numeric| <= tolerance * max(|analytic|, |numeric|) + 6 sigma / (sqrt(2) h)
  // (the relative part is the truncation error of the differences); at most
  // `allowed_outliers` may disagree (steps that cross a kink).
  static void ExpectGradientsMatch(Model& model, double h, double tolerance, int64_t allowed_outliers,
                                   int64_t stride = 1) {
    model.InitializeVariables(3);
    Shape shape = {2};
    shape.insert(shape.end(), model.input_shape().begin(), model.input_shape().end());
    Tensor images(shape);
    std::mt19937_64 rng(4);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (float& v : images.span()) v = dist(rng);
    const int32_t labels[] = {0, 2};

    model.TrainStep(images, labels, nullptr);
    std::vector<Tensor> analytic;
    for (const Variable& v : model.variables()) analytic.push_back(v.grad.Clone());
    const double sigma = LossNoise(model, images, labels, h);
    const double noise = 6 * sigma / (std::sqrt(2.0) * h);
    int64_t checked = 0, outliers = 0, caught = 0;
    double worst = 0;  // |analytic - numeric| over what the element was allowed
    std::string worst_at;
    for (size_t i = 0; i < model.variables().size(); ++i) {
      Tensor value = model.variables()[i].value;
      for (int64_t j = 0; j < value.num_elements(); j += stride) {
        float& v = value.data()[j];
        const float saved = v;
        v = static_cast<float>(saved + h);
        const double plus = model.TrainStep(images, labels, nullptr);
        v = static_cast<float>(saved - h);
        const double minus = model.TrainStep(images, labels, nullptr);
        v = saved;
        const double numeric = (plus - minus) / 2 / h;
        const double a = analytic[i].data()[j];
        const double error = std::fabs(a - numeric) / (tolerance * std::max(std::fabs(a), std::fabs(numeric)) + noise);
        ++checked;
        if (error > 1) ++outliers;
        // The same comparison must see a gradient 10% off.
        const double wrong = 1.1 * a;
        if (std::fabs(wrong - numeric) > tolerance * std::max(std::fabs(wrong), std::fabs(numeric)) + noise) ++caught;
        if (error > worst) {
          worst = error;
          worst_at = absl::StrFormat("%s[%d]: analytic %.6g numeric %.6g", model.variables()[i].name, j, a, numeric);
        }
      }
    }
    const std::string summary = absl::StrFormat(
        "%s: checked %d variable elements, %d outliers; loss noise %.3g per evaluation (%.3g in a "
        "derivative); worst %.3g of its allowance at %s; "
        "a gradient 10%% off would fail at %d",
        model.name(), checked, outliers, sigma, noise, worst, worst_at, caught);
    EXPECT_GT(checked, 1000 / stride);
    EXPECT_LE(outliers, allowed_outliers) << summary;
    EXPECT_GT(caught, checked / 2) << "the allowance is too wide to see a wrong gradient: " << summary;
    std::cout << summary << "\n";
  }

  std::unique_ptr<DeviceContext> ctx_;
};

// Central differences of the float loss. The smooth chain must match
// everywhere, with a step of 1e-2: its truncation error is far below 2%
// (conv1/weights[105] of the deep chain: 0.0033267 at steps 8e-3 and 1.6e-2
// against 0.0033239 analytic), while a step of 1e-3 let the loss's rounding
// (+-2 units in the last place of a float near 1) reach 1.2e-4 in the
// derivative, 4% of that gradient on AVX2. With relu and max pooling a step
// now and then crosses a kink (more often the longer the step), so a short
// step there and 1% outliers.
TEST_F(LayoutModelTest, GradientsMatchFiniteDifferences) {
  auto smooth = Build(/*smooth=*/true);
  ASSERT_NE(smooth, nullptr);
  ExpectGradientsMatch(*smooth, 1e-2, 2e-2, 0);
  auto chain = Build();
  ASSERT_NE(chain, nullptr);
  ExpectGradientsMatch(*chain, 3e-4, 5e-2, 11);
}

// Gradient buffers shared through adds must not leak one branch's
// accumulation into another's read:
//   p = conv(x), q = conv(x), m = conv(p), s = add(p, q), t = add(s, m)
// t shares its buffer with s and m, s with p; q may not join (m's backward
// adds into p's gradient, i.e. the shared buffer, before q reads it).
TEST_F(LayoutModelTest, SharedGradientBuffersInADiamond) {
  ModelBuilder b("diamond", {4, 4, 4}, 3, ctx_.get());
  auto conv = [] { return LayerSpec{"conv2d"}.Int("filters", 8).Int("kernel", 3).Int("padding", 1); };
  int p = b.Add("p", conv(), {ModelBuilder::kInput});
  int q = b.Add("q", conv(), {ModelBuilder::kInput});
  int m = b.Add("m", conv(), {p});
  int s = b.Add("s", LayerSpec{"add"}, {p, q});
  b.Add("t", LayerSpec{"add"}, {s, m});
  b.Then("pool", LayerSpec{"avg_pool"}.Int("kernel", 2));
  auto model = b.Finish(b.Then("logits", LayerSpec{"dense"}.Int("units", 3)));
  ASSERT_TRUE(model.ok()) << model.status();
  ExpectGradientsMatch(**model, 1e-2, 2e-2, 0);
}

// Sixteen channels: no blocked format pads them (8- and 16-channel blocks),
// so every activation and gradient is placed by its lifetime. The plan must
// reuse bytes (activations read only in forward, e.g. bn2's before the add,
// die early; gradients die after their node's backward), and the gradients
// must still match finite differences.
//   conv1 -> bn1+relu -> conv2 -> bn2 -> add(bn1+relu) -> relu -> conv3
//   -> bn3+relu -> max_pool -> dense
// `smooth`: without the relus, average pooling.
std::unique_ptr<Model> BuildDeepChain(DeviceContext* ctx, bool smooth = false) {
  ModelBuilder b("deep_chain", {3, 6, 6}, 3, ctx);
  auto conv = [] { return LayerSpec{"conv2d"}.Int("filters", 16).Int("kernel", 3).Int("padding", 1).Int("bias", 0); };
  b.Then("conv1", conv());
  b.Then("bn1", LayerSpec{"batch_norm"});
  const int relu1 = smooth ? 2 : b.Then("relu1", LayerSpec{"relu"});
  b.Then("conv2", conv());
  const int bn2 = b.Then("bn2", LayerSpec{"batch_norm"});
  b.Add("sum", LayerSpec{"add"}, {bn2, relu1});
  if (!smooth) b.Then("relu2", LayerSpec{"relu"});
  b.Then("conv3", conv());
  b.Then("bn3", LayerSpec{"batch_norm"});
  if (!smooth) b.Then("relu3", LayerSpec{"relu"});
  b.Then("pool", LayerSpec{smooth ? "avg_pool" : "max_pool"}.Int("kernel", 2));
  auto model = b.Finish(b.Then("logits", LayerSpec{"dense"}.Int("units", 3)));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

TEST_F(LayoutModelTest, MemoryPlanReusesBytesAndGradientsStillMatch) {
  auto smooth = BuildDeepChain(ctx_.get(), /*smooth=*/true);
  ASSERT_NE(smooth, nullptr);
  ExpectGradientsMatch(*smooth, 1e-2, 2e-2, 0, /*stride=*/7);
  // With relu and max pooling, steps crossing kinks: at most 2% outliers.
  auto model = BuildDeepChain(ctx_.get());
  ASSERT_NE(model, nullptr);
  ExpectGradientsMatch(*model, 1e-3, 5e-2, 16, /*stride=*/7);
  const StepMemory memory = model->LastStepMemory(/*training=*/true);
  std::cout << "deep_chain training step: " << memory.buffers << " buffers, arena " << memory.arena_bytes << " bytes, "
            << memory.separate_bytes << " apart, live peak " << memory.live_peak_bytes << "\n";
  EXPECT_GT(memory.buffers, 10);
  EXPECT_LT(memory.arena_bytes, memory.separate_bytes * 3 / 4) << "the plan reused too little";
  EXPECT_GE(memory.arena_bytes, memory.live_peak_bytes);
}

// Plans per batch size and mode: evaluating at another batch size between
// two training steps changes nothing the second step computes, and an
// evaluation (no backward: every activation dies after its last reader)
// holds less than a training step of the same batch.
TEST_F(LayoutModelTest, PlansForOtherBatchSizesLeaveTrainingUnchanged) {
  auto model = BuildDeepChain(ctx_.get());
  ASSERT_NE(model, nullptr);
  model->InitializeVariables(9);
  std::mt19937_64 rng(10);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto random_images = [&](int64_t n) {
    Tensor images({n, 3, 6, 6});
    for (float& v : images.span()) v = dist(rng);
    return images;
  };
  const Tensor train = random_images(4), eval = random_images(5);
  const int32_t labels[] = {0, 1, 2, 0, 1};
  auto gradients = [&] {
    const float loss = model->TrainStep(train, labels, nullptr);
    std::vector<float> all = {loss};
    for (const Variable& v : model->variables()) all.insert(all.end(), v.grad.span().begin(), v.grad.span().end());
    return all;
  };
  const std::vector<float> first = gradients();
  const EvalResult a = model->Evaluate(eval, labels);
  const std::vector<float> second = gradients();
  const EvalResult b = model->Evaluate(eval, labels);
  EXPECT_EQ(first, second);             // bit for bit: no buffer of one plan leaked into the other
  EXPECT_NE(a.mean_loss, b.mean_loss);  // the steps moved batch norm's running averages
  EXPECT_EQ(b.mean_loss, model->Evaluate(eval, labels).mean_loss);
  const int64_t eval_bytes = model->LastStepMemory(/*training=*/false).arena_bytes;
  const Tensor eval_at_train_batch = random_images(4);
  model->Evaluate(eval_at_train_batch, labels);
  EXPECT_GT(eval_bytes, 0);
  EXPECT_LT(model->LastStepMemory(/*training=*/false).arena_bytes,
            model->LastStepMemory(/*training=*/true).arena_bytes);
}

TEST_F(LayoutModelTest, EvaluateIsDeterministicAndFlopsAddUp) {
  auto model = Build();
  ASSERT_NE(model, nullptr);
  model->InitializeVariables(5);
  Tensor images({3, 4, 6, 6});
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& v : images.span()) v = dist(rng);
  const int32_t labels[] = {0, 1, 2};
  EvalResult a = model->Evaluate(images, labels);
  model->TrainStep(images, labels, nullptr);  // changes bn's running averages
  EvalResult b = model->Evaluate(images, labels);
  EvalResult c = model->Evaluate(images, labels);
  EXPECT_TRUE(std::isfinite(a.mean_loss));
  EXPECT_NE(a.mean_loss, b.mean_loss);
  EXPECT_EQ(b.mean_loss, c.mean_loss);
  EXPECT_EQ(model->ForwardFlopsPerExample(),
            2 * (8 * 36) * (4 * 9) + 2 * (8 * 36) * (8 * 9) + 2 * (8 * 9) * 3);  // conv1 + conv2 + logits
}

}  // namespace
}  // namespace pstrain
