// "lenet": a LeNet-5-style convolutional network for small grey images
// (Fashion-MNIST's 1x28x28), sized to reach >= 0.89 test accuracy on
// Fashion-MNIST within 3 epochs under 2 PS / 2 workers sync
// (configs/fashion_mnist_lenet_sync.yaml; measured runs in docs/BENCHMARKS.md):
//
//   conv1  conv2d 32 filters 5x5, pad 2   [32, 28, 28]
//   relu1
//   pool1  max_pool 2x2 stride 2          [32, 14, 14]
//   conv2  conv2d 64 filters 5x5          [64, 10, 10]
//   relu2
//   pool2  max_pool 2x2 stride 2          [64, 5, 5]
//   flatten
//   fc1    dense 256
//   relu3
//   logits dense num_classes
//
// LeNet-5's shape (a padded first conv, an unpadded second one, 5x5 maps into
// the classifier) with wider convolutions, ReLU and max pooling instead of
// 6/16 filters, tanh and average pooling. At 1x28x28 and 10 classes: 464,522
// parameters, 12.3 MFLOP forward per example (multiply-add = 2). Any
// [C, H, W] with H, W >= 12 builds; the fc1 input size follows the shape.
#include "models/zoo/zoo_util.h"

namespace pstrain {
namespace {

absl::StatusOr<std::unique_ptr<Model>> BuildLenet(const ModelConfig& config, DeviceContext* ctx) {
  PSTRAIN_RETURN_IF_ERROR(zoo::CheckImageInput(config, 12));
  ModelBuilder b(config.name(), zoo::InputShapeOf(config), config.num_classes(), ctx);
  b.Then("conv1", zoo::Conv(32, 5, 1, 2));
  b.Then("relu1", LayerSpec{"relu"});
  b.Then("pool1", zoo::Pool("max_pool", 2, 2));
  b.Then("conv2", zoo::Conv(64, 5, 1, 0));
  b.Then("relu2", LayerSpec{"relu"});
  b.Then("pool2", zoo::Pool("max_pool", 2, 2));
  b.Then("flatten", LayerSpec{"flatten"});
  b.Then("fc1", zoo::Dense(256));
  b.Then("relu3", LayerSpec{"relu"});
  return b.Finish(b.Then("logits", zoo::Dense(config.num_classes())));
}

[[maybe_unused]] const bool kRegistered = RegisterModel("lenet", BuildLenet);

}  // namespace
}  // namespace pstrain
