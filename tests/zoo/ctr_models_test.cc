// The click-through-rate models (models/zoo/dlrm.cc): "dlrm" and
// "wide_deep" over 13 dense features and 3 tables of dim 4, as the worker
// feeds them: one input [1, 1, 13 + 3*4] per example (the dense features,
// then each table's pooled embedding). Shapes, variables, FLOPs, a few SGD
// steps applied by hand (the worker refuses tables to a cluster run until
// its sparse stage lands), and the configs they refuse, naming the field.
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/model.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

ModelConfig CtrConfig(const std::string& name, std::vector<int> dims = {4, 4, 4}) {
  ModelConfig config;
  config.set_name(name);
  for (int d : {1, 1, 13}) config.add_input_shape(d);
  config.set_num_classes(2);
  for (size_t t = 0; t < dims.size(); ++t) {
    EmbeddingTableConfig* table = config.add_tables();
    table->set_name("c" + std::to_string(t + 1));
    table->set_dim(dims[t]);
  }
  return config;
}

class CtrModelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ctx = CreateDeviceContext(Device::Cpu());
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_ = std::move(*ctx);
  }

  std::unique_ptr<Model> Create(const ModelConfig& config) {
    auto model = CreateModel(config, ctx_.get());
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? std::move(*model) : nullptr;
  }

  absl::Status Refusal(const ModelConfig& config) { return CreateModel(config, ctx_.get()).status(); }

  static std::map<std::string, Shape> ShapesByName(const Model& model) {
    std::map<std::string, Shape> shapes;
    for (const auto& [name, shape] : model.LayerShapes()) shapes[name] = shape;
    return shapes;
  }

  // Mean loss of each of `steps` TrainSteps on one fixed batch of `batch`
  // random inputs with 0/1 labels, SGD (learning rate `lr`) applied by hand
  // after each.
  static std::vector<float> TrainOnOneBatch(Model& model, int batch, int steps, float lr) {
    model.InitializeVariables(/*seed=*/7);
    Shape shape = {batch};
    shape.insert(shape.end(), model.input_shape().begin(), model.input_shape().end());
    Tensor inputs(shape);
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0, 1);
    for (float& v : inputs.span()) v = normal(rng);
    std::vector<int32_t> labels(batch);
    for (int i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(rng() % 2);
    std::vector<float> losses;
    for (int s = 0; s < steps; ++s) {
      losses.push_back(model.TrainStep(inputs, labels.data(), nullptr));
      for (Variable& v : model.variables()) {
        for (int64_t i = 0; i < v.value.num_elements(); ++i) v.value.data()[i] -= lr * v.grad.data()[i];
      }
    }
    return losses;
  }

  std::unique_ptr<DeviceContext> ctx_;
};

TEST_F(CtrModelsTest, BothAreRegistered) {
  EXPECT_THAT(RegisteredModels(), ::testing::IsSupersetOf({"dlrm", "wide_deep"}));
}

TEST_F(CtrModelsTest, DlrmShapesAndVariables) {
  auto model = Create(CtrConfig("dlrm"));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->input_shape(), (Shape{1, 1, 25}));
  EXPECT_EQ(model->num_classes(), 2);
  const std::map<std::string, Shape> shapes = ShapesByName(*model);
  EXPECT_EQ(shapes.at("dense_features"), (Shape{13}));
  EXPECT_EQ(shapes.at("bottom1"), (Shape{64}));
  EXPECT_EQ(shapes.at("bottom_relu2"), (Shape{4}));  // default bottom_units [64, dim]
  EXPECT_EQ(shapes.at("embeddings"), (Shape{12}));
  EXPECT_EQ(shapes.at("interaction_inputs"), (Shape{16}));
  EXPECT_EQ(shapes.at("interaction"), (Shape{6}));  // 4 vectors: 4*3/2 pairs
  EXPECT_EQ(shapes.at("top_inputs"), (Shape{10}));
  EXPECT_EQ(shapes.at("top1"), (Shape{64}));
  EXPECT_EQ(shapes.at("top2"), (Shape{32}));
  EXPECT_EQ(shapes.at("logits"), (Shape{2}));
  std::vector<std::string> names;
  for (const Variable& v : model->variables()) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"bottom1/weights", "bottom1/bias", "bottom2/weights", "bottom2/bias",
                                             "top1/weights", "top1/bias", "top2/weights", "top2/bias", "logits/weights",
                                             "logits/bias"}));
  // Dense layers, plus 2*d per pair of the interaction.
  const int64_t dense = 13 * 64 + 64 * 4 + 10 * 64 + 64 * 32 + 32 * 2;
  EXPECT_EQ(model->ForwardFlopsPerExample(), 2 * dense + 2 * 4 * 6);
}

// Criteo's shape (configs/dlrm_synthetic_sync.yaml): 26 tables of dim 16.
TEST_F(CtrModelsTest, DlrmAtCriteoSize) {
  ModelConfig config = CtrConfig("dlrm", std::vector<int>(26, 16));
  auto model = Create(config);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->input_shape(), (Shape{1, 1, 13 + 26 * 16}));
  const std::map<std::string, Shape> shapes = ShapesByName(*model);
  EXPECT_EQ(shapes.at("interaction"), (Shape{27 * 26 / 2}));
  EXPECT_EQ(shapes.at("top_inputs"), (Shape{16 + 351}));
  const std::vector<float> losses = TrainOnOneBatch(*model, /*batch=*/256, /*steps=*/3, /*lr=*/0.05f);
  for (float loss : losses) EXPECT_TRUE(std::isfinite(loss)) << loss;
}

TEST_F(CtrModelsTest, DlrmTakesItsMlpSizesFromTheConfig) {
  ModelConfig config = CtrConfig("dlrm");
  for (int u : {16, 8, 4}) config.add_bottom_units(u);
  config.add_top_units(8);
  auto model = Create(config);
  ASSERT_NE(model, nullptr);
  const std::map<std::string, Shape> shapes = ShapesByName(*model);
  EXPECT_EQ(shapes.at("bottom2"), (Shape{8}));
  EXPECT_EQ(shapes.at("bottom3"), (Shape{4}));
  EXPECT_EQ(shapes.at("top1"), (Shape{8}));
  EXPECT_EQ(shapes.count("top2"), 0u);
}

TEST_F(CtrModelsTest, WideDeepShapesAndVariables) {
  auto model = Create(CtrConfig("wide_deep", {4, 8, 2}));  // any dims
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->input_shape(), (Shape{1, 1, 27}));
  EXPECT_EQ(model->num_classes(), 2);
  const std::map<std::string, Shape> shapes = ShapesByName(*model);
  EXPECT_EQ(shapes.at("wide"), (Shape{2}));
  EXPECT_EQ(shapes.at("deep1"), (Shape{64}));  // default hidden_units [64, 32]
  EXPECT_EQ(shapes.at("deep2"), (Shape{32}));
  EXPECT_EQ(shapes.at("deep_logits"), (Shape{2}));
  EXPECT_EQ(shapes.at("logits"), (Shape{2}));
  EXPECT_EQ(model->variables().front().name, "wide/weights");
  EXPECT_EQ(model->variables().front().value.shape(), (Shape{27, 2}));
  EXPECT_EQ(model->ForwardFlopsPerExample(), 2 * (27 * 2 + 27 * 64 + 64 * 32 + 32 * 2));
}

TEST_F(CtrModelsTest, SgdStepsLowerTheLoss) {
  for (const char* name : {"dlrm", "wide_deep"}) {
    SCOPED_TRACE(name);
    auto model = Create(CtrConfig(name));
    ASSERT_NE(model, nullptr);
    const std::vector<float> losses = TrainOnOneBatch(*model, /*batch=*/32, /*steps=*/30, /*lr=*/0.1f);
    for (float loss : losses) ASSERT_TRUE(std::isfinite(loss)) << loss;
    EXPECT_NEAR(losses.front(), std::log(2.0f), 0.3f);  // two classes, small initial logits
    EXPECT_LT(losses.back(), 0.8f * losses.front()) << "first " << losses.front() << ", last " << losses.back();
    // The input's gradient flows through the slices to the embeddings: the
    // model's output depends on every part of the input.
    Tensor one({1, 1, 1, model->input_shape()[2]});
    const int32_t label = 1;
    const EvalResult base = model->Evaluate(one, &label);
    one.data()[13 + 5] = 3;  // an embedding value
    EXPECT_NE(model->Evaluate(one, &label).mean_loss, base.mean_loss);
  }
}

TEST_F(CtrModelsTest, RefusedConfigsNameTheField) {
  for (const char* name : {"dlrm", "wide_deep"}) {
    SCOPED_TRACE(name);
    EXPECT_THAT(Refusal(CtrConfig(name, {})).message(), HasSubstr("model.tables must list at least one"));
    ModelConfig three = CtrConfig(name);
    three.set_num_classes(3);
    EXPECT_THAT(Refusal(three).message(), HasSubstr("model.num_classes must be 2 (no click, click), got 3"));
    ModelConfig image = CtrConfig(name);
    image.set_input_shape(0, 3);
    EXPECT_THAT(Refusal(image).message(), HasSubstr("model.input_shape must be [1, 1, D]"));
    EXPECT_EQ(Refusal(image).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_THAT(Refusal(CtrConfig("dlrm", {4, 8, 4})).message(),
              HasSubstr("model.tables[1].dim is 8 but model.tables[0].dim is 4"));
  ModelConfig bottom = CtrConfig("dlrm");
  bottom.add_bottom_units(16);
  bottom.add_bottom_units(8);
  EXPECT_THAT(Refusal(bottom).message(), HasSubstr("model.bottom_units' last entry must equal the tables' dim 4"));
  ModelConfig top = CtrConfig("dlrm");
  top.add_top_units(0);
  EXPECT_THAT(Refusal(top).message(), HasSubstr("model.top_units[0] must be positive, got 0"));
  ModelConfig hidden = CtrConfig("wide_deep");
  hidden.add_hidden_units(-1);
  EXPECT_THAT(Refusal(hidden).message(), HasSubstr("model.hidden_units[0] must be positive, got -1"));
}

// On a GPU, dlrm's CPU-only layers are refused naming the layer (no GPU
// here: the layer registry's half is in cpu_layers_test.cc).
TEST_F(CtrModelsTest, DlrmOnAGpuIsRefusedNamingTheLayer) {
  auto cuda = CreateDeviceContext(Device{DeviceKind::kCuda, 0});
  if (!cuda.ok()) GTEST_SKIP() << "no CUDA device: " << cuda.status();
  for (const char* name : {"dlrm", "wide_deep"}) {
    auto model = CreateModel(CtrConfig(name), cuda->get());
    if (std::string(name) == "wide_deep") {
      EXPECT_TRUE(model.ok()) << model.status();  // dense and add only
      continue;
    }
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition) << model.status();
    EXPECT_THAT(model.status().message(), HasSubstr("layer \"dense_features\" (slice)"));
    EXPECT_THAT(model.status().message(), HasSubstr("CPUs only"));
  }
}

}  // namespace
}  // namespace pstrain
