// The graph model and the fully connected zoo entries, on the CPU.
#include "models/model.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/graph_model.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

class ModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ctx = CreateDeviceContext(Device::Cpu());
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_ = std::move(*ctx);
  }

  std::unique_ptr<Model> Create(const std::string& name, Shape input_shape, int num_classes,
                                std::vector<int> hidden = {}) {
    ModelConfig config;
    config.set_name(name);
    for (int64_t d : input_shape) config.add_input_shape(static_cast<int>(d));
    config.set_num_classes(num_classes);
    for (int h : hidden) config.add_hidden_units(h);
    auto model = CreateModel(config, ctx_.get());
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? std::move(*model) : nullptr;
  }

  // Images uniform in [-1, 1] and uniform labels, fixed by `seed`.
  static std::pair<Tensor, std::vector<int32_t>> RandomBatch(int64_t n, const Shape& input_shape, int classes,
                                                             uint64_t seed) {
    Shape shape = {n};
    shape.insert(shape.end(), input_shape.begin(), input_shape.end());
    Tensor images(shape);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (float& v : images.span()) v = dist(rng);
    std::vector<int32_t> labels(n);
    for (int32_t& l : labels) l = static_cast<int32_t>(rng() % classes);
    return {images, labels};
  }

  std::unique_ptr<DeviceContext> ctx_;
};

TEST_F(ModelTest, MlpHasTheClassicParameterCountAndNames) {
  auto model = Create("mlp", {1, 28, 28}, 10);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->name(), "mlp");
  EXPECT_EQ(model->input_shape(), (Shape{1, 28, 28}));
  EXPECT_EQ(model->num_classes(), 10);
  EXPECT_EQ(model->num_parameters(), 784 * 128 + 128 + 128 * 32 + 32 + 32 * 10 + 10);
  std::vector<std::string> names;
  for (const Variable& v : model->variables()) names.push_back(v.name);
  EXPECT_THAT(names, ElementsAre("hidden1/weights", "hidden1/bias", "hidden2/weights", "hidden2/bias", "logits/weights",
                                 "logits/bias"));
  EXPECT_EQ(model->variables()[0].value.shape(), (Shape{784, 128}));
  EXPECT_EQ(model->variables()[5].value.shape(), (Shape{10}));
}

TEST_F(ModelTest, MlpLayerShapes) {
  auto model = Create("mlp", {1, 28, 28}, 10);
  ASSERT_NE(model, nullptr);
  EXPECT_THAT(model->LayerShapes(),
              ElementsAre(Pair("flatten", Shape{784}), Pair("hidden1", Shape{128}), Pair("relu1", Shape{128}),
                          Pair("hidden2", Shape{32}), Pair("relu2", Shape{32}), Pair("logits", Shape{10})));
}

TEST_F(ModelTest, MlpHonoursHiddenUnits) {
  auto model = Create("mlp", {3, 4, 4}, 5, {20, 10, 7});
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->num_parameters(), 48 * 20 + 20 + 20 * 10 + 10 + 10 * 7 + 7 + 7 * 5 + 5);
  EXPECT_EQ(model->LayerShapes().size(), 8u);
}

TEST_F(ModelTest, TrivialIsLogisticRegression) {
  auto model = Create("trivial", {1, 2, 3}, 4);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->num_parameters(), 6 * 4 + 4);
}

TEST_F(ModelTest, ForwardAndBackwardShapesAcrossBatchSizes) {
  auto model = Create("mlp", {1, 6, 6}, 3, {8, 4});
  ASSERT_NE(model, nullptr);
  model->InitializeVariables(1);
  auto [small, small_labels] = RandomBatch(3, {1, 6, 6}, 3, 1);
  auto [big, big_labels] = RandomBatch(10, {1, 6, 6}, 3, 2);

  EvalResult first = model->Evaluate(small, small_labels.data());
  EXPECT_EQ(first.examples, 3);
  EXPECT_GE(first.correct, 0);
  EXPECT_LE(first.correct, 3);
  EXPECT_TRUE(std::isfinite(first.mean_loss));
  EXPECT_GT(first.mean_loss, 0);

  float loss = model->TrainStep(big, big_labels.data(), nullptr);
  EXPECT_TRUE(std::isfinite(loss));
  for (const Variable& v : model->variables()) EXPECT_EQ(v.grad.shape(), v.value.shape()) << v.name;

  // Switching back to the first batch size gives the first answer again.
  EvalResult again = model->Evaluate(small, small_labels.data());
  EXPECT_EQ(again.mean_loss, first.mean_loss);
  EXPECT_EQ(again.correct, first.correct);
}

TEST_F(ModelTest, EvaluateCountsArgmaxHits) {
  auto model = Create("trivial", {1, 1, 3}, 3);
  ASSERT_NE(model, nullptr);
  // weights = identity, bias = 0: the logits are the inputs.
  model->variables()[0].value.SetZero();
  for (int i = 0; i < 3; ++i) model->variables()[0].value.data()[i * 3 + i] = 1;
  model->variables()[1].value.SetZero();
  Tensor images({4, 1, 1, 3});
  const float x[] = {3, 1, 0, /**/ 0, 2, 1, /**/ 0, 1, 5, /**/ 4, 0, 0};
  std::copy(std::begin(x), std::end(x), images.data());
  const int32_t labels[] = {0, 1, 0, 2};  // the first two match
  EvalResult r = model->Evaluate(images, labels);
  EXPECT_EQ(r.examples, 4);
  EXPECT_EQ(r.correct, 2);
  // Mean of -log softmax(x)[label], computed here in double.
  double expected = 0;
  for (int i = 0; i < 4; ++i) {
    double z = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(x[i * 3 + c]);
    expected -= std::log(std::exp(x[i * 3 + labels[i]]) / z);
  }
  EXPECT_NEAR(r.mean_loss, expected / 4, 1e-5);
}

TEST_F(ModelTest, InitializeVariablesIsDeterministicPerSeed) {
  auto a = Create("mlp", {1, 28, 28}, 10);
  auto b = Create("mlp", {1, 28, 28}, 10);
  ASSERT_TRUE(a && b);
  a->InitializeVariables(42);
  b->InitializeVariables(7);
  b->InitializeVariables(42);  // re-initialising overwrites
  int differing = 0;
  for (size_t i = 0; i < a->variables().size(); ++i) {
    const Tensor& va = a->variables()[i].value;
    const Tensor& vb = b->variables()[i].value;
    ASSERT_EQ(va.num_elements(), vb.num_elements());
    for (int64_t j = 0; j < va.num_elements(); ++j) ASSERT_EQ(va.data()[j], vb.data()[j]) << i << "," << j;
  }
  b->InitializeVariables(43);
  const Tensor& wa = a->variables()[0].value;
  const Tensor& wb = b->variables()[0].value;
  for (int64_t j = 0; j < wa.num_elements(); ++j) differing += wa.data()[j] != wb.data()[j];
  EXPECT_GT(differing, wa.num_elements() * 9 / 10);
}

TEST_F(ModelTest, InitializersFollowTheirDistributions) {
  auto model = Create("mlp", {1, 28, 28}, 10);
  ASSERT_NE(model, nullptr);
  model->InitializeVariables(3);
  const Tensor& w = model->variables()[0].value;  // glorot, fan 784 + 128
  const double limit = std::sqrt(6.0 / (784 + 128));
  double sum = 0, sum_sq = 0, max_abs = 0;
  for (float v : w.span()) {
    sum += v;
    sum_sq += double{v} * v;
    max_abs = std::max(max_abs, std::fabs(double{v}));
  }
  const double n = w.num_elements();
  EXPECT_LE(max_abs, limit);
  EXPECT_GT(max_abs, limit * 0.99);
  EXPECT_NEAR(sum / n, 0, limit * 0.01);
  EXPECT_NEAR(sum_sq / n, limit * limit / 3, limit * limit * 0.01);       // variance of U(-a, a)
  for (float v : model->variables()[1].value.span()) ASSERT_EQ(v, 0.0f);  // bias: zeros
  // Different variables of one seed are not copies of each other.
  EXPECT_NE(model->variables()[2].value.data()[0], w.data()[0]);
}

// A byte-scaled emulated model draws only the first values of each
// variable: the same values as the whole draw, the model's own untouched.
TEST_F(ModelTest, VariablePrefixesAreTheFirstValuesOfTheWholeDraw) {
  auto whole = Create("lenet", {1, 28, 28}, 10);
  auto drawn = Create("lenet", {1, 28, 28}, 10);
  ASSERT_NE(whole, nullptr);
  ASSERT_NE(drawn, nullptr);
  whole->InitializeVariables(11);
  std::vector<std::vector<float>> prefixes;
  std::vector<absl::Span<float>> spans;
  for (const Variable& v : whole->variables()) prefixes.emplace_back((v.value.num_elements() + 2) / 3, -7.0f);
  for (std::vector<float>& p : prefixes) spans.emplace_back(p);
  drawn->InitializeVariablePrefixes(11, spans);
  int non_zero = 0;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const Tensor& value = whole->variables()[i].value;
    for (size_t e = 0; e < prefixes[i].size(); ++e) {
      ASSERT_EQ(prefixes[i][e], value.data()[e]) << whole->variables()[i].name << "[" << e << "]";
      non_zero += prefixes[i][e] != 0.0f;
    }
    for (float untouched : drawn->variables()[i].value.span()) ASSERT_EQ(untouched, 0.0f);
  }
  EXPECT_GT(non_zero, 1000);  // the weights were drawn, not only the zero biases
}

TEST(InitializeParameterTest, HeNormalAndOnes) {
  Parameter p{"w", Tensor({100000}), Tensor({100000}), Initializer::kHeNormal, 50, 10};
  InitializeParameter(p, 1, 0, p.value);
  double sum = 0, sum_sq = 0;
  for (float v : p.value.span()) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sum_sq += double{v} * v;
  }
  const double n = p.value.num_elements(), stddev = std::sqrt(2.0 / 50);
  EXPECT_NEAR(sum / n, 0, stddev * 0.02);
  EXPECT_NEAR(std::sqrt(sum_sq / n), stddev, stddev * 0.02);

  p.init = Initializer::kOnes;
  InitializeParameter(p, 1, 0, p.value);
  for (float v : p.value.span()) ASSERT_EQ(v, 1.0f);
}

TEST_F(ModelTest, GradientReadyHookFiresOncePerVariableInReverseOrder) {
  auto model = Create("mlp", {1, 5, 5}, 4, {6, 3});
  ASSERT_NE(model, nullptr);
  model->InitializeVariables(1);
  auto [images, labels] = RandomBatch(8, {1, 5, 5}, 4, 9);
  std::vector<int> order;
  model->TrainStep(images, labels.data(), [&](int v) { order.push_back(v); });
  EXPECT_THAT(order, ElementsAre(5, 4, 3, 2, 1, 0));
}

// The forward asks for each variable before the first layer that reads it,
// in forward order, once per TrainStep; evaluation never waits.
TEST_F(ModelTest, ForwardWaitsForEachVariableBeforeItsLayer) {
  auto model = Create("mlp", {1, 5, 5}, 4, {6, 3});
  ASSERT_NE(model, nullptr);
  model->InitializeVariables(1);
  auto [images, labels] = RandomBatch(8, {1, 5, 5}, 4, 9);
  std::vector<int> waited;
  model->SetVariableWait([&](int v) { waited.push_back(v); });
  std::vector<int> order;
  model->TrainStep(images, labels.data(), [&](int v) { order.push_back(v); });
  EXPECT_THAT(waited, ElementsAre(0, 1, 2, 3, 4, 5));
  model->Evaluate(images, labels.data());
  EXPECT_EQ(waited.size(), 6u);
  // A wait that changes a variable before its layer runs is seen by it:
  // the forward reads after the wait (as a pull landing layer by layer).
  const float loss_before = model->TrainStep(images, labels.data(), nullptr);
  model->SetVariableWait([&](int v) {
    if (v == 4) std::fill(model->variables()[4].value.span().begin(), model->variables()[4].value.span().end(), 0.f);
  });
  const float loss_zeroed = model->TrainStep(images, labels.data(), nullptr);
  EXPECT_NE(loss_zeroed, loss_before);
  model->SetVariableWait(nullptr);
}

TEST_F(ModelTest, HookSeesFinalGradients) {
  // Each gradient, when its hook fires, already equals its end-of-step value.
  auto model = Create("mlp", {1, 5, 5}, 4, {6, 3});
  ASSERT_NE(model, nullptr);
  model->InitializeVariables(1);
  auto [images, labels] = RandomBatch(8, {1, 5, 5}, 4, 9);
  std::vector<Tensor> at_hook(model->variables().size());
  model->TrainStep(images, labels.data(), [&](int v) { at_hook[v] = model->variables()[v].grad.Clone(); });
  for (size_t i = 0; i < at_hook.size(); ++i) {
    const Tensor& end = model->variables()[i].grad;
    ASSERT_FALSE(at_hook[i].empty());
    for (int64_t j = 0; j < end.num_elements(); ++j) ASSERT_EQ(at_hook[i].data()[j], end.data()[j]) << i;
  }
}

TEST_F(ModelTest, SgdOnAFixedDatasetLowersTheLoss) {
  const Shape input = {1, 4, 4};
  auto model = Create("mlp", input, 4, {32, 16});
  ASSERT_NE(model, nullptr);
  model->InitializeVariables(5);
  auto [images, labels] = RandomBatch(32, input, 4, 11);
  const float initial = model->Evaluate(images, labels.data()).mean_loss;
  for (int step = 0; step < 300; ++step) {
    model->TrainStep(images, labels.data(), nullptr);
    for (Variable& v : model->variables()) {
      for (int64_t i = 0; i < v.value.num_elements(); ++i) v.value.data()[i] -= 0.5f * v.grad.data()[i];
    }
  }
  EvalResult final_result = model->Evaluate(images, labels.data());
  EXPECT_LT(final_result.mean_loss, initial * 0.1) << "initial " << initial;
  EXPECT_GE(final_result.correct, 30);  // memorised (nearly) all 32 random labels
}

// ---- Graphs built directly, with fan-out ----

// input -> stem -> {a, b} -> sum(a, b, a) -> logits: the stem's gradient is the
// sum of two consumers' and `a` feeds the same layer twice.
absl::StatusOr<std::unique_ptr<Model>> BuildFanOut(DeviceContext* ctx) {
  ModelBuilder b("fan_out", {2, 3}, 3, ctx);
  int stem = b.Then("stem", LayerSpec{"dense"}.Int("units", 5));
  int a = b.Add("a", LayerSpec{"dense"}.Int("units", 4), {stem});
  int c = b.Add("b", LayerSpec{"dense"}.Int("units", 4), {stem});
  int sum = b.Add("sum", LayerSpec{"add"}, {a, c, a});
  return b.Finish(b.Add("logits", LayerSpec{"dense"}.Int("units", 3), {sum}));
}

TEST_F(ModelTest, FanOutGradientsMatchFiniteDifferences) {
  auto model_or = BuildFanOut(ctx_.get());
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  Model& model = **model_or;
  model.InitializeVariables(2);
  for (Variable& v : model.variables()) {  // non-zero biases too
    for (float& x : v.value.span()) x += 0.1f;
  }
  auto [images, labels] = RandomBatch(4, {2, 3}, 3, 4);
  std::vector<int> order;
  model.TrainStep(images, labels.data(), [&](int v) { order.push_back(v); });
  EXPECT_THAT(order, ElementsAre(7, 6, 5, 4, 3, 2, 1, 0));

  const double h = 1e-2;
  double worst = 0;
  std::string where;
  for (Variable& v : model.variables()) {
    for (int64_t i = 0; i < v.value.num_elements(); ++i) {
      float& x = v.value.data()[i];
      const float saved = x;
      x = saved + h;
      const double plus = model.Evaluate(images, labels.data()).mean_loss;
      x = saved - h;
      const double minus = model.Evaluate(images, labels.data()).mean_loss;
      x = saved;
      const double numeric = (plus - minus) / (2 * h);
      const double analytic = v.grad.data()[i];
      const double err = std::fabs(numeric - analytic) / std::max({std::fabs(numeric), std::fabs(analytic), 1e-2});
      if (err > worst) {
        worst = err;
        where = absl::StrCat(v.name, "[", i, "] analytic ", analytic, " numeric ", numeric);
      }
    }
  }
  EXPECT_LT(worst, 1e-2) << where;
}

// The end of a residual block, relu(add(branch, shortcut)): the model fuses
// the relu into the add (Layer::Fuse), so the relu's output and gradient
// cost no buffers; a dropout there (rate 0, the same shape of work) is not
// fused and does cost them. A second reader of the sum stops the fusion.
TEST_F(ModelTest, AReluAfterAnAddIsFusedIntoIt) {
  auto step_buffers = [&](const LayerSpec& after_add, bool second_reader) {
    ModelBuilder b("block", {8}, 3, ctx_.get());
    const int branch = b.Then("branch", LayerSpec{"dense"}.Int("units", 8));
    const int sum = b.Add("add", LayerSpec{"add"}, {branch, ModelBuilder::kInput});
    int n = b.Then("after_add", after_add);
    if (second_reader) n = b.Add("twice", LayerSpec{"add"}, {n, sum});
    auto model = b.Finish(b.Then("logits", LayerSpec{"dense"}.Int("units", 3)));
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return -1;
    (*model)->InitializeVariables(1);
    Tensor images({4, 8});
    for (int64_t i = 0; i < images.num_elements(); ++i) images.data()[i] = static_cast<float>(i % 7) - 3;
    const int32_t labels[] = {0, 1, 2, 0};
    EXPECT_TRUE(std::isfinite((*model)->TrainStep(images, labels, nullptr)));
    return (*model)->LastStepMemory(/*training=*/true).buffers;
  };
  const LayerSpec relu("relu"), dropout = LayerSpec{"dropout"}.Float("rate", 0);
  const int fused = step_buffers(relu, false);
  ASSERT_GT(fused, 0);
  EXPECT_LT(fused, step_buffers(dropout, false)) << "the relu was not fused into the add";
  EXPECT_EQ(step_buffers(relu, true), step_buffers(dropout, true)) << "a sum read twice took the relu";
}

TEST_F(ModelTest, BuilderReportsGraphErrors) {
  {
    ModelBuilder b("m", {4}, 2, ctx_.get());
    b.Then("dangling", LayerSpec{"dense"}.Int("units", 3));
    auto logits = b.Add("logits", LayerSpec{"dense"}.Int("units", 2), {ModelBuilder::kInput});
    auto model = b.Finish(logits);
    ASSERT_FALSE(model.ok());
    EXPECT_THAT(model.status().message(), HasSubstr("\"dangling\" does not feed the logits"));
  }
  {
    ModelBuilder b("m", {4}, 2, ctx_.get());
    b.Then("x", LayerSpec{"relu"});
    auto model = b.Finish(b.Then("x", LayerSpec{"dense"}.Int("units", 2)));
    ASSERT_FALSE(model.ok());
    EXPECT_THAT(model.status().message(), HasSubstr("two layers are named \"x\""));
  }
  {
    ModelBuilder b("m", {4}, 2, ctx_.get());
    auto model = b.Finish(b.Then("logits", LayerSpec{"dense"}.Int("units", 3)));
    ASSERT_FALSE(model.ok());
    EXPECT_THAT(model.status().message(), HasSubstr("want [2]"));
  }
  {
    ModelBuilder b("m", {4}, 2, ctx_.get());
    b.Then("mystery", LayerSpec{"warp_drive"});
    auto model = b.Finish(b.Then("logits", LayerSpec{"dense"}.Int("units", 2)));
    ASSERT_EQ(model.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(model.status().message(), HasSubstr("layer \"mystery\" (warp_drive)"));
    EXPECT_THAT(model.status().message(), HasSubstr("dense"));
  }
  {
    ModelBuilder b("m", {4}, 2, ctx_.get());
    auto model = b.Finish(b.Add("logits", LayerSpec{"dense"}.Int("units", 2), {5}));
    ASSERT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(model.status().message(), HasSubstr("reads node 5"));
  }
}

}  // namespace
}  // namespace pstrain
