// "vgg16": VGG-16 (configuration D of Simonyan & Zisserman 2014) in
// torchvision's layout without batch norm, 138,357,544 parameters at
// 3x224x224 and 1000 classes.
//
//   conv1_1..conv1_2  conv2d 64  3x3 pad 1, each + relu  -> pool1 max_pool 2x2 stride 2
//   conv2_1..conv2_2  conv2d 128 3x3 pad 1, each + relu  -> pool2
//   conv3_1..conv3_3  conv2d 256 3x3 pad 1, each + relu  -> pool3
//   conv4_1..conv4_3  conv2d 512 3x3 pad 1, each + relu  -> pool4
//   conv5_1..conv5_3  conv2d 512 3x3 pad 1, each + relu  -> pool5
//   flatten -> fc6 dense 4096 -> relu6 -> dropout6 (0.5)
//           -> fc7 dense 4096 -> relu7 -> dropout7 (0.5)
//           -> logits dense num_classes
//
// At 224x224 pool5 is [512, 7, 7] and fc6 reads 25088 inputs, as in
// torchvision (whose adaptive 7x7 average pool is the identity there; here
// the fc6 input size follows the input shape instead). Small inputs: a pool
// whose input is smaller than 2x2 is skipped, so 3x32x32 builds (pool5 is
// [512, 1, 1], fc6 reads 512). Any H, W >= 1 works.
#include "models/zoo/zoo_util.h"

namespace pstrain {
namespace {

absl::StatusOr<std::unique_ptr<Model>> BuildVgg16(const ModelConfig& config, DeviceContext* ctx) {
  PSTRAIN_RETURN_IF_ERROR(zoo::CheckImageInput(config, 1));
  int64_t h = config.input_shape(1), w = config.input_shape(2);
  ModelBuilder b(config.name(), zoo::InputShapeOf(config), config.num_classes(), ctx);
  struct Stage {
    int64_t filters;
    int convs;
  };
  constexpr Stage kStages[] = {{64, 2}, {128, 2}, {256, 3}, {512, 3}, {512, 3}};
  for (int s = 0; s < 5; ++s) {
    for (int c = 1; c <= kStages[s].convs; ++c) {
      b.Then(absl::StrCat("conv", s + 1, "_", c), zoo::Conv(kStages[s].filters, 3, 1, 1));
      b.Then(absl::StrCat("relu", s + 1, "_", c), LayerSpec{"relu"});
    }
    if (h >= 2 && w >= 2) {
      b.Then(absl::StrCat("pool", s + 1), zoo::Pool("max_pool", 2, 2));
      h /= 2;
      w /= 2;
    }
  }
  b.Then("flatten", LayerSpec{"flatten"});
  b.Then("fc6", zoo::Dense(4096));
  b.Then("relu6", LayerSpec{"relu"});
  b.Then("dropout6", zoo::Dropout(0.5, 6));
  b.Then("fc7", zoo::Dense(4096));
  b.Then("relu7", LayerSpec{"relu"});
  b.Then("dropout7", zoo::Dropout(0.5, 7));
  return b.Finish(b.Then("logits", zoo::Dense(config.num_classes())));
}

[[maybe_unused]] const bool kRegistered = RegisterModel("vgg16", BuildVgg16);

}  // namespace
}  // namespace pstrain
