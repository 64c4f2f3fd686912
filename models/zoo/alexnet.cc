// "alexnet": torchvision's AlexNet layout ("One weird trick", Krizhevsky
// 2014: 64/192/384/256/256 filters, no LRN, no grouping), 61,100,840
// parameters at 3x224x224 and 1000 classes.
//
//   conv1 conv2d 64 11x11 stride 4 pad 2 -> relu1 -> pool1 max_pool 3x3 stride 2
//   conv2 conv2d 192 5x5 pad 2          -> relu2 -> pool2 max_pool 3x3 stride 2
//   conv3 conv2d 384 3x3 pad 1          -> relu3
//   conv4 conv2d 256 3x3 pad 1          -> relu4
//   conv5 conv2d 256 3x3 pad 1          -> relu5 -> pool5 max_pool 3x3 stride 2
//   flatten -> dropout6 (0.5) -> fc6 dense 4096 -> relu6
//           -> dropout7 (0.5) -> fc7 dense 4096 -> relu7
//           -> logits dense num_classes
//
// At 224x224 the maps are 55, 27, 13, 13, 13, 6: pool5 is [256, 6, 6] and fc6
// reads 9216 inputs, as in torchvision (whose adaptive 6x6 average pool is
// then the identity; here there is none, the fc6 input size follows the input
// shape instead). The LRN of the 2012 paper is left out, as torchvision and
// tf_cnn_benchmarks do; it has no parameters, so counts are unchanged.
// Small inputs: a max pool whose input is smaller than its 3x3 window is
// skipped, so e.g. 3x32x32 builds (maps 7, 3, 3, 1, 1 -> fc6 reads 256).
// Inputs need H, W >= 7 (conv1's 11x11 window over the padded image).
#include "models/zoo/zoo_util.h"

namespace pstrain {
namespace {

absl::StatusOr<std::unique_ptr<Model>> BuildAlexnet(const ModelConfig& config, DeviceContext* ctx) {
  PSTRAIN_RETURN_IF_ERROR(zoo::CheckImageInput(config, 7));
  int64_t h = config.input_shape(1), w = config.input_shape(2);
  ModelBuilder b(config.name(), zoo::InputShapeOf(config), config.num_classes(), ctx);
  auto conv = [&](const std::string& name, int64_t filters, int64_t k, int64_t stride, int64_t pad) {
    b.Then(name, zoo::Conv(filters, k, stride, pad));
    h = zoo::WindowOut(h, k, stride, pad);
    w = zoo::WindowOut(w, k, stride, pad);
  };
  // Skipped when the map is smaller than the window (small inputs only).
  auto pool = [&](const std::string& name) {
    if (h < 3 || w < 3) return;
    b.Then(name, zoo::Pool("max_pool", 3, 2));
    h = zoo::WindowOut(h, 3, 2, 0);
    w = zoo::WindowOut(w, 3, 2, 0);
  };
  conv("conv1", 64, 11, 4, 2);
  b.Then("relu1", LayerSpec{"relu"});
  pool("pool1");
  conv("conv2", 192, 5, 1, 2);
  b.Then("relu2", LayerSpec{"relu"});
  pool("pool2");
  conv("conv3", 384, 3, 1, 1);
  b.Then("relu3", LayerSpec{"relu"});
  conv("conv4", 256, 3, 1, 1);
  b.Then("relu4", LayerSpec{"relu"});
  conv("conv5", 256, 3, 1, 1);
  b.Then("relu5", LayerSpec{"relu"});
  pool("pool5");
  b.Then("flatten", LayerSpec{"flatten"});
  b.Then("dropout6", zoo::Dropout(0.5, 6));
  b.Then("fc6", zoo::Dense(4096));
  b.Then("relu6", LayerSpec{"relu"});
  b.Then("dropout7", zoo::Dropout(0.5, 7));
  b.Then("fc7", zoo::Dense(4096));
  b.Then("relu7", LayerSpec{"relu"});
  return b.Finish(b.Then("logits", zoo::Dense(config.num_classes())));
}

[[maybe_unused]] const bool kRegistered = RegisterModel("alexnet", BuildAlexnet);

}  // namespace
}  // namespace pstrain
