// "resnet50", "resnet101", "resnet152": ResNet v1.5 (He et al. 2015 with the
// stride of each downsampling bottleneck on its 3x3 conv, as torchvision and
// tf_cnn_benchmarks' v1.5 do). Convolutions have no bias; batch norm has
// epsilon 1e-5. Parameter counts at 3x224x224 and 1000 classes, batch-norm
// gamma/beta included (running statistics are not variables):
// resnet50 25,557,032; resnet101 44,549,160; resnet152 60,192,808.
//
//   conv1 conv2d 64 7x7 stride 2 pad 3 -> bn1 -> relu -> maxpool 3x3 stride 2 pad 1
//   layer1..layer4: [3,4,6,3] (50), [3,4,23,3] (101), [3,8,36,3] (152)
//     bottlenecks of width 64, 128, 256, 512 (outputs 4x that); the first
//     block of layer2..4 has stride 2. Block "layerL.i":
//       conv1 1x1 width -> bn1 -> relu1
//       conv2 3x3 width, stride, pad 1 -> bn2 -> relu2
//       conv3 1x1 4*width -> bn3
//       downsample/conv 1x1 4*width stride -> downsample/bn  (first block only)
//       add (bn3 + shortcut) -> relu
//   avgpool global_avg_pool -> fc dense num_classes
//
// Variables are named as torchvision's state_dict, e.g. "conv1/weights",
// "layer2.0/conv2/weights", "layer2.0/downsample/bn/<param>", "fc/weights".
// At 224x224 layer4 outputs [2048, 7, 7]; the global pool makes any input of
// H, W >= 1 build (3x32x32: layer4 is [2048, 1, 1]).
#include "models/zoo/zoo_util.h"

namespace pstrain {
namespace {

constexpr double kBnEpsilon = 1e-5;

// One bottleneck block reading `input`; returns its output node.
int Bottleneck(ModelBuilder& b, const std::string& name, int input, int64_t width, int64_t stride, bool downsample) {
  auto add = [&](const std::string& local, const LayerSpec& spec, int from) {
    return b.Add(absl::StrCat(name, "/", local), spec, {from});
  };
  int n = add("conv1", zoo::Conv(width, 1, 1, 0, /*bias=*/false), input);
  n = add("bn1", zoo::BatchNorm(kBnEpsilon), n);
  n = add("relu1", LayerSpec{"relu"}, n);
  n = add("conv2", zoo::Conv(width, 3, stride, 1, /*bias=*/false), n);
  n = add("bn2", zoo::BatchNorm(kBnEpsilon), n);
  n = add("relu2", LayerSpec{"relu"}, n);
  n = add("conv3", zoo::Conv(4 * width, 1, 1, 0, /*bias=*/false), n);
  n = add("bn3", zoo::BatchNorm(kBnEpsilon), n);
  int shortcut = input;
  if (downsample) {
    shortcut = add("downsample/conv", zoo::Conv(4 * width, 1, stride, 0, /*bias=*/false), input);
    shortcut = add("downsample/bn", zoo::BatchNorm(kBnEpsilon), shortcut);
  }
  n = b.Add(absl::StrCat(name, "/add"), LayerSpec{"add"}, {n, shortcut});
  return add("relu", LayerSpec{"relu"}, n);
}

absl::StatusOr<std::unique_ptr<Model>> BuildResnet(const ModelConfig& config, DeviceContext* ctx,
                                                   const std::vector<int>& blocks) {
  PSTRAIN_RETURN_IF_ERROR(zoo::CheckImageInput(config, 1));
  ModelBuilder b(config.name(), zoo::InputShapeOf(config), config.num_classes(), ctx);
  b.Then("conv1", zoo::Conv(64, 7, 2, 3, /*bias=*/false));
  b.Then("bn1", zoo::BatchNorm(kBnEpsilon));
  b.Then("relu", LayerSpec{"relu"});
  int n = b.Then("maxpool", zoo::Pool("max_pool", 3, 2, 1));
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = int64_t{64} << stage;
    for (int i = 0; i < blocks[stage]; ++i) {
      const int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      // The first block of every stage changes the channel count (layer1:
      // 64 -> 256), so it always has a projection shortcut.
      n = Bottleneck(b, absl::StrCat("layer", stage + 1, ".", i), n, width, stride, /*downsample=*/i == 0);
    }
  }
  b.Then("avgpool", LayerSpec{"global_avg_pool"});
  return b.Finish(b.Then("fc", zoo::Dense(config.num_classes())));
}

[[maybe_unused]] const bool kRegistered = RegisterModel("resnet50",
                                                        [](const ModelConfig& c, DeviceContext* ctx) {
                                                          return BuildResnet(c, ctx, {3, 4, 6, 3});
                                                        }) &&
                                          RegisterModel("resnet101",
                                                        [](const ModelConfig& c, DeviceContext* ctx) {
                                                          return BuildResnet(c, ctx, {3, 4, 23, 3});
                                                        }) &&
                                          RegisterModel("resnet152", [](const ModelConfig& c, DeviceContext* ctx) {
                                            return BuildResnet(c, ctx, {3, 8, 36, 3});
                                          });

}  // namespace
}  // namespace pstrain
