// The model zoo at its published input sizes: exact parameter counts
// (torchvision's, batch-norm gamma/beta included), layer output shapes,
// variable names and order. Only Setup runs (parameters are allocated, no
// forward pass), so this stays fast; VGG16 allocates ~1.1 GB for a moment.
// Small-input builds are covered too: the training test runs them.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/model.h"

namespace pstrain {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

class ZooModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ctx = CreateDeviceContext(Device::Cpu());
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_ = std::move(*ctx);
  }

  absl::StatusOr<std::unique_ptr<Model>> Build(const std::string& name, Shape input_shape, int num_classes) {
    ModelConfig config;
    config.set_name(name);
    for (int64_t d : input_shape) config.add_input_shape(static_cast<int>(d));
    config.set_num_classes(num_classes);
    return CreateModel(config, ctx_.get());
  }

  std::unique_ptr<Model> Create(const std::string& name, Shape input_shape, int num_classes) {
    auto model = Build(name, std::move(input_shape), num_classes);
    EXPECT_TRUE(model.ok()) << name << ": " << model.status();
    return model.ok() ? std::move(*model) : nullptr;
  }

  static std::map<std::string, Shape> ShapesByName(const Model& model) {
    std::map<std::string, Shape> shapes;
    for (const auto& [name, shape] : model.LayerShapes()) shapes[name] = shape;
    return shapes;
  }

  static std::vector<std::string> VariableNames(Model& model) {
    std::vector<std::string> names;
    for (const Variable& v : model.variables()) names.push_back(v.name);
    return names;
  }

  // Expects each named layer to have the given per-example output shape.
  static void ExpectShapes(const Model& model, const std::vector<std::pair<std::string, Shape>>& expected) {
    const std::map<std::string, Shape> shapes = ShapesByName(model);
    for (const auto& [layer, shape] : expected) {
      auto it = shapes.find(layer);
      if (it == shapes.end()) {
        ADD_FAILURE() << model.name() << ": no layer \"" << layer << "\"";
        continue;
      }
      EXPECT_EQ(it->second, shape) << model.name() << " layer \"" << layer << "\" is " << ShapeToString(it->second)
                                   << ", want " << ShapeToString(shape);
    }
  }

  std::unique_ptr<DeviceContext> ctx_;
};

TEST_F(ZooModelTest, EveryZooModelIsRegistered) {
  std::vector<std::string> names = RegisteredModels();
  for (const char* name : {"trivial", "mlp", "lenet", "alexnet", "vgg16", "resnet50", "resnet101", "resnet152",
                           "inception3", "dlrm", "wide_deep"}) {
    EXPECT_THAT(names, Contains(name));
  }
}

TEST_F(ZooModelTest, Lenet) {
  auto model = Create("lenet", {1, 28, 28}, 10);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->num_parameters(), 464522);
  EXPECT_EQ(model->ForwardFlopsPerExample(), 2 * (28 * 28 * 32 * 25 + 10 * 10 * 64 * 32 * 25 + 1600 * 256 + 256 * 10));
  ExpectShapes(*model, {{"conv1", {32, 28, 28}},
                        {"pool1", {32, 14, 14}},
                        {"conv2", {64, 10, 10}},
                        {"pool2", {64, 5, 5}},
                        {"fc1", {256}},
                        {"logits", {10}}});
  EXPECT_EQ(VariableNames(*model),
            (std::vector<std::string>{"conv1/weights", "conv1/bias", "conv2/weights", "conv2/bias", "fc1/weights",
                                      "fc1/bias", "logits/weights", "logits/bias"}));
}

TEST_F(ZooModelTest, AlexnetHasTorchvisionParameterCount) {
  auto model = Create("alexnet", {3, 224, 224}, 1000);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->num_parameters(), 61100840);
  ExpectShapes(*model, {{"conv1", {64, 55, 55}},
                        {"pool1", {64, 27, 27}},
                        {"conv2", {192, 27, 27}},
                        {"pool2", {192, 13, 13}},
                        {"conv5", {256, 13, 13}},
                        {"pool5", {256, 6, 6}},
                        {"fc6", {4096}},
                        {"fc7", {4096}},
                        {"logits", {1000}}});
  const std::vector<std::string> names = VariableNames(*model);
  ASSERT_EQ(names.size(), 16u);
  EXPECT_EQ(names.front(), "conv1/weights");
  EXPECT_EQ(names[10], "fc6/weights");
  EXPECT_EQ(names.back(), "logits/bias");
}

TEST_F(ZooModelTest, AlexnetAtSmallInputSkipsPoolsThatDoNotFit) {
  auto model = Create("alexnet", {3, 32, 32}, 10);
  ASSERT_NE(model, nullptr);
  ExpectShapes(*model, {{"conv1", {64, 7, 7}}, {"pool2", {192, 1, 1}}, {"conv5", {256, 1, 1}}, {"logits", {10}}});
  EXPECT_EQ(ShapesByName(*model).count("pool5"), 0u);
}

TEST_F(ZooModelTest, Vgg16HasTorchvisionParameterCount) {
  auto model = Create("vgg16", {3, 224, 224}, 1000);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->num_parameters(), 138357544);
  ExpectShapes(*model, {{"conv1_1", {64, 224, 224}},
                        {"pool1", {64, 112, 112}},
                        {"conv3_3", {256, 56, 56}},
                        {"pool4", {512, 14, 14}},
                        {"pool5", {512, 7, 7}},
                        {"fc6", {4096}},
                        {"logits", {1000}}});
  const std::vector<std::string> names = VariableNames(*model);
  ASSERT_EQ(names.size(), 32u);
  EXPECT_EQ(names.front(), "conv1_1/weights");
  EXPECT_EQ(names[26], "fc6/weights");
}

struct ResnetCase {
  const char* name;
  int64_t parameters;
  int blocks[4];
};

TEST_F(ZooModelTest, ResnetsHaveTorchvisionParameterCounts) {
  for (const ResnetCase& c :
       {ResnetCase{"resnet50", 25557032, {3, 4, 6, 3}}, ResnetCase{"resnet101", 44549160, {3, 4, 23, 3}},
        ResnetCase{"resnet152", 60192808, {3, 8, 36, 3}}}) {
    SCOPED_TRACE(c.name);
    auto model = Create(c.name, {3, 224, 224}, 1000);
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->num_parameters(), c.parameters);
    const auto last = [&](int stage) { return absl::StrCat("layer", stage, ".", c.blocks[stage - 1] - 1, "/relu"); };
    ExpectShapes(*model, {{"conv1", {64, 112, 112}},
                          {"maxpool", {64, 56, 56}},
                          {"layer1.0/conv1", {64, 56, 56}},
                          {"layer1.0/downsample/bn", {256, 56, 56}},
                          {last(1), {256, 56, 56}},
                          {"layer2.0/conv1", {128, 56, 56}},  // v1.5: stride on the 3x3
                          {"layer2.0/conv2", {128, 28, 28}},
                          {last(2), {512, 28, 28}},
                          {last(3), {1024, 14, 14}},
                          {last(4), {2048, 7, 7}},
                          {"fc", {1000}}});
    // Convs: 1 + 3 per block + 4 projections, one variable each; as many
    // batch norms with two; fc weights and bias.
    const int blocks = c.blocks[0] + c.blocks[1] + c.blocks[2] + c.blocks[3];
    const size_t convs = 1 + 3 * blocks + 4;
    const std::vector<std::string> names = VariableNames(*model);
    EXPECT_EQ(names.size(), 3 * convs + 2);
    EXPECT_EQ(names.front(), "conv1/weights");
    EXPECT_THAT(names, Contains("layer1.0/conv1/weights"));
    EXPECT_THAT(names, Contains("layer4.0/downsample/conv/weights"));
    EXPECT_THAT(names, Contains(absl::StrCat("layer3.", c.blocks[2] - 1, "/conv3/weights")));
    EXPECT_EQ(names[names.size() - 2], "fc/weights");
    EXPECT_EQ(names.back(), "fc/bias");
  }
}

TEST_F(ZooModelTest, Inception3HasTorchvisionParameterCount) {
  auto model = Create("inception3", {3, 299, 299}, 1000);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->num_parameters(), 23834568);
  ExpectShapes(*model, {{"Conv2d_1a_3x3/relu", {32, 149, 149}},
                        {"Conv2d_2a_3x3/relu", {32, 147, 147}},
                        {"Conv2d_2b_3x3/relu", {64, 147, 147}},
                        {"maxpool1", {64, 73, 73}},
                        {"Conv2d_3b_1x1/relu", {80, 73, 73}},
                        {"Conv2d_4a_3x3/relu", {192, 71, 71}},
                        {"maxpool2", {192, 35, 35}},
                        {"Mixed_5b/concat", {256, 35, 35}},
                        {"Mixed_5c/concat", {288, 35, 35}},
                        {"Mixed_5d/concat", {288, 35, 35}},
                        {"Mixed_6a/concat", {768, 17, 17}},
                        {"Mixed_6e/concat", {768, 17, 17}},
                        {"Mixed_7a/concat", {1280, 8, 8}},
                        {"Mixed_7b/concat", {2048, 8, 8}},
                        {"Mixed_7c/concat", {2048, 8, 8}},
                        {"fc", {1000}}});
  const std::vector<std::string> names = VariableNames(*model);
  // 94 BasicConv2d (conv weights + bn's two) and fc.
  EXPECT_EQ(names.size(), 94u * 3 + 2);
  EXPECT_EQ(names.front(), "Conv2d_1a_3x3/conv/weights");
  EXPECT_THAT(names, Contains("Mixed_6b/branch7x7dbl_5/conv/weights"));
  EXPECT_THAT(names, Contains("Mixed_7c/branch_pool/conv/weights"));
  EXPECT_EQ(names.back(), "fc/bias");
}

TEST_F(ZooModelTest, Inception3At75x75ReachesOneByOne) {
  auto model = Create("inception3", {3, 75, 75}, 10);
  ASSERT_NE(model, nullptr);
  ExpectShapes(*model, {{"Mixed_5d/concat", {288, 7, 7}},
                        {"Mixed_6e/concat", {768, 3, 3}},
                        {"Mixed_7c/concat", {2048, 1, 1}},
                        {"fc", {10}}});
}

TEST_F(ZooModelTest, TooSmallInputsAreRejectedWithTheMinimum) {
  auto inception = Build("inception3", {3, 74, 74}, 10);
  ASSERT_EQ(inception.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(inception.status().message(), HasSubstr(">= 75"));
  auto alexnet = Build("alexnet", {3, 6, 6}, 10);
  ASSERT_EQ(alexnet.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(alexnet.status().message(), HasSubstr(">= 7"));
  auto lenet = Build("lenet", {1, 28}, 10);
  ASSERT_EQ(lenet.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lenet.status().message(), HasSubstr("[channels, height, width]"));
}

TEST_F(ZooModelTest, SmallInputsBuildForEveryModel) {
  for (const auto& [name, shape] : std::vector<std::pair<std::string, Shape>>{{"lenet", {1, 28, 28}},
                                                                              {"alexnet", {3, 32, 32}},
                                                                              {"vgg16", {3, 32, 32}},
                                                                              {"resnet50", {3, 32, 32}},
                                                                              {"resnet101", {3, 32, 32}},
                                                                              {"resnet152", {3, 32, 32}},
                                                                              {"inception3", {3, 75, 75}}}) {
    auto model = Create(name, shape, 10);
    ASSERT_NE(model, nullptr) << name;
    EXPECT_EQ(model->LayerShapes().back().second, Shape{10}) << name;
  }
}

}  // namespace
}  // namespace pstrain
