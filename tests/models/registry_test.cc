// Layer and model registries, device contexts and setup-time errors. Linking
// pstrain_models_all is what makes the registrations visible here.
#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/layers/layer.h"
#include "models/layers/layer_rules.h"
#include "models/model.h"

namespace pstrain {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

TEST(LayerRegistryTest, CpuLayersAreRegistered) {
  EXPECT_THAT(RegisteredLayerTypes(DeviceKind::kCpu),
              IsSupersetOf({"add", "avg_pool", "batch_norm", "concat", "conv2d", "dense", "dot_interaction", "dropout",
                            "flatten", "global_avg_pool", "lrn", "max_pool", "relu", "slice"}));
}

TEST(LayerRegistryTest, UnknownTypeIsNotFoundAndListsKnownTypes) {
  auto layer = CreateLayer(LayerSpec{"convolution_9d"}, DeviceKind::kCpu);
  ASSERT_EQ(layer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(layer.status().message(), HasSubstr("'convolution_9d'"));
  for (const char* known : {"add", "dense", "flatten", "relu"}) {
    EXPECT_THAT(layer.status().message(), HasSubstr(known));
  }
}

TEST(LayerRegistryTest, CreatesEachRegisteredType) {
  for (const std::string& type : RegisteredLayerTypes(DeviceKind::kCpu)) {
    auto layer = CreateLayer(LayerSpec{type}, DeviceKind::kCpu);
    EXPECT_TRUE(layer.ok() && *layer != nullptr) << type << ": " << layer.status();
  }
}

// A spec means the same on every device: a type registered on both reads
// the same attributes there (RegisterLayer also CHECKs it at start-up).
TEST(LayerRegistryTest, EveryTypeReadsTheSameAttributesOnEveryDevice) {
  for (const std::string& type : RegisteredLayerTypes(DeviceKind::kCuda)) {
    const absl::StatusOr<LayerAttributes> cpu = AttributesOf(type, DeviceKind::kCpu);
    const absl::StatusOr<LayerAttributes> cuda = AttributesOf(type, DeviceKind::kCuda);
    ASSERT_TRUE(cpu.ok()) << type << " is registered for cuda only: " << cpu.status();
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    EXPECT_EQ(cpu->ints, cuda->ints) << type;
    EXPECT_EQ(cpu->floats, cuda->floats) << type;
  }
  const absl::StatusOr<LayerAttributes> conv = AttributesOf("conv2d", DeviceKind::kCpu);
  ASSERT_TRUE(conv.ok()) << conv.status();
  EXPECT_THAT(conv->ints, ::testing::Contains("filters"));
  EXPECT_EQ(AttributesOf("no_such_layer", DeviceKind::kCpu).status().code(), absl::StatusCode::kNotFound);
}

// A misspelled attribute would otherwise be ignored (stride 1 instead of 2):
// it is refused, on every device, naming what the type reads.
TEST(LayerRegistryTest, UnknownAttributesAreRefusedOnEveryDevice) {
  const LayerSpec typo = LayerSpec{"conv2d"}.Int("filters", 8).Ints("kernel", {3, 3}).Ints("strides", {2, 2});
  for (DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kCuda}) {
    if (RegisteredLayerTypes(kind).empty()) continue;  // a build without CUDA layers
    auto layer = CreateLayer(typo, kind);
    ASSERT_FALSE(layer.ok());
    EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(layer.status().message(),
              "conv2d: unknown integer attribute \"strides\"; conv2d reads bias, filters, groups, kernel, padding, "
              "stride");
  }
  auto relu = CreateLayer(LayerSpec{"relu"}.Float("alpha", 0.1), DeviceKind::kCpu);
  ASSERT_FALSE(relu.ok());
  EXPECT_EQ(relu.status().message(), "relu: unknown float attribute \"alpha\"; relu takes no attributes");
  auto int_rate = CreateLayer(LayerSpec{"dropout"}.Int("rate", 1), DeviceKind::kCpu);
  ASSERT_FALSE(int_rate.ok());
  EXPECT_THAT(int_rate.status().message(), HasSubstr("\"rate\" is a float"));
  EXPECT_TRUE(CreateLayer(LayerSpec{"lrn"}.Int("size", 3).Float("alpha", 1e-4), DeviceKind::kCpu).ok());
}

TEST(LayerSpecTest, GettersFallBackWhenAbsent) {
  LayerSpec spec = LayerSpec{"x"}.Int("units", 7).Ints("kernel", {3, 5}).Float("epsilon", 0.5);
  EXPECT_EQ(spec.GetInt("units", -1), 7);
  EXPECT_EQ(spec.GetInt("missing", -1), -1);
  EXPECT_EQ(spec.GetInts("kernel", {}), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(spec.GetInts("missing", {1}), (std::vector<int64_t>{1}));
  EXPECT_EQ(spec.GetFloat("epsilon", 0), 0.5);
  EXPECT_EQ(spec.GetFloat("missing", 2.5), 2.5);
}

TEST(LayerSetupTest, DenseRejectsMissingUnitsAndExtraInputs) {
  auto dense = CreateLayer(LayerSpec{"dense"}, DeviceKind::kCpu);
  ASSERT_TRUE(dense.ok());
  EXPECT_THAT((*dense)->Setup({{4}}).status().message(), HasSubstr("units"));

  auto dense2 = CreateLayer(LayerSpec{"dense"}.Int("units", 3), DeviceKind::kCpu);
  ASSERT_TRUE(dense2.ok());
  EXPECT_EQ((*dense2)->Setup({{4}, {4}}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LayerSetupTest, DenseParametersHaveShapesAndFans) {
  auto dense = CreateLayer(LayerSpec{"dense"}.Int("units", 3), DeviceKind::kCpu);
  ASSERT_TRUE(dense.ok());
  auto out = (*dense)->Setup({{2, 4, 5}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, (Shape{3}));
  auto& params = (*dense)->parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].name, "weights");
  EXPECT_EQ(params[0].value.shape(), (Shape{40, 3}));
  EXPECT_EQ(params[0].grad.shape(), (Shape{40, 3}));
  EXPECT_EQ(params[0].init, Initializer::kGlorotUniform);
  EXPECT_EQ(params[0].fan_in, 40);
  EXPECT_EQ(params[0].fan_out, 3);
  EXPECT_EQ(params[1].name, "bias");
  EXPECT_EQ(params[1].value.shape(), (Shape{3}));
  EXPECT_EQ(params[1].init, Initializer::kZeros);
}

TEST(LayerSetupTest, AddRejectsMismatchedShapes) {
  auto add = CreateLayer(LayerSpec{"add"}, DeviceKind::kCpu);
  ASSERT_TRUE(add.ok());
  EXPECT_EQ((*add)->Setup({{3}, {4}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*add)->Setup({{3}}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceContextTest, CpuContextWorks) {
  auto ctx = CreateDeviceContext(Device::Cpu());
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  EXPECT_EQ((*ctx)->device(), Device::Cpu());
  (*ctx)->Synchronize();
}

// Without a usable GPU a CUDA build refuses with FailedPrecondition or
// Unavailable (no CUDA device) and a CPU-only build with Unimplemented (built
// without CUDA); either way the message names the device.
TEST(DeviceContextTest, CudaIsUnavailableOrWorks) {
  const Device gpu{DeviceKind::kCuda, 0};
  auto ctx = CreateDeviceContext(gpu);
  if (ctx.ok()) {
    EXPECT_EQ((*ctx)->device(), gpu);
    (*ctx)->Synchronize();
    return;
  }
  EXPECT_THAT(ctx.status().code(), AnyOf(absl::StatusCode::kUnimplemented, absl::StatusCode::kFailedPrecondition,
                                         absl::StatusCode::kUnavailable))
      << ctx.status();
  EXPECT_THAT(ctx.status().message(), HasSubstr(gpu.ToString()));
}

TEST(ModelRegistryTest, ZooModelsAreRegistered) { EXPECT_THAT(RegisteredModels(), IsSupersetOf({"mlp", "trivial"})); }

class ModelConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ctx = CreateDeviceContext(Device::Cpu());
    ASSERT_TRUE(ctx.ok());
    ctx_ = std::move(*ctx);
  }
  std::unique_ptr<DeviceContext> ctx_;
};

TEST_F(ModelConfigTest, UnknownModelIsNotFoundAndListsKnownModels) {
  ModelConfig config;
  config.set_name("resnet9000");
  config.add_input_shape(1);
  config.set_num_classes(10);
  auto model = CreateModel(config, ctx_.get());
  ASSERT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(model.status().message(), HasSubstr("'resnet9000'"));
  EXPECT_THAT(model.status().message(), HasSubstr("mlp"));
  EXPECT_THAT(model.status().message(), HasSubstr("trivial"));
}

TEST_F(ModelConfigTest, InputShapeAndNumClassesAreRequired) {
  ModelConfig config;  // name defaults to "mlp"
  config.set_num_classes(10);
  auto no_shape = CreateModel(config, ctx_.get());
  EXPECT_EQ(no_shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_shape.status().message(), HasSubstr("input_shape"));

  config.clear_num_classes();
  for (int d : {1, 28, 28}) config.add_input_shape(d);
  auto no_classes = CreateModel(config, ctx_.get());
  EXPECT_EQ(no_classes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_classes.status().message(), HasSubstr("num_classes"));

  config.set_num_classes(10);
  EXPECT_TRUE(CreateModel(config, ctx_.get()).ok());
}

TEST_F(ModelConfigTest, MlpRejectsNonPositiveHiddenUnits) {
  ModelConfig config;
  config.add_input_shape(4);
  config.set_num_classes(2);
  config.add_hidden_units(8);
  config.add_hidden_units(0);
  auto model = CreateModel(config, ctx_.get());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("hidden_units[1]"));
}

}  // namespace
}  // namespace pstrain
