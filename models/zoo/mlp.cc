// Fully connected models.
//
// "mlp": flatten -> hidden1 (dense) -> relu1 -> ... -> logits (dense), one
// dense+relu pair per entry of model.hidden_units ([128, 32] when empty: the
// classic fully_connected_feed example).
// "trivial": flatten -> logits (dense); multinomial logistic regression, for tests.
#include "absl/strings/str_cat.h"
#include "models/model.h"

namespace pstrain {
namespace {

Shape InputShape(const ModelConfig& config) { return Shape(config.input_shape().begin(), config.input_shape().end()); }

absl::StatusOr<std::unique_ptr<Model>> BuildMlp(const ModelConfig& config, DeviceContext* ctx) {
  std::vector<int64_t> hidden(config.hidden_units().begin(), config.hidden_units().end());
  if (hidden.empty()) hidden = {128, 32};
  ModelBuilder b(config.name(), InputShape(config), config.num_classes(), ctx);
  b.Then("flatten", LayerSpec{"flatten"});
  for (size_t i = 0; i < hidden.size(); ++i) {
    if (hidden[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model \"", config.name(), "\": hidden_units[", i, "] must be positive, got ", hidden[i]));
    }
    b.Then(absl::StrCat("hidden", i + 1), LayerSpec{"dense"}.Int("units", hidden[i]));
    b.Then(absl::StrCat("relu", i + 1), LayerSpec{"relu"});
  }
  return b.Finish(b.Then("logits", LayerSpec{"dense"}.Int("units", config.num_classes())));
}

absl::StatusOr<std::unique_ptr<Model>> BuildTrivial(const ModelConfig& config, DeviceContext* ctx) {
  ModelBuilder b(config.name(), InputShape(config), config.num_classes(), ctx);
  b.Then("flatten", LayerSpec{"flatten"});
  return b.Finish(b.Then("logits", LayerSpec{"dense"}.Int("units", config.num_classes())));
}

[[maybe_unused]] const bool kRegistered = RegisterModel("mlp", BuildMlp) && RegisterModel("trivial", BuildTrivial);

}  // namespace
}  // namespace pstrain
