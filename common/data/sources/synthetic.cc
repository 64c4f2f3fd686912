// synthetic: data.synthetic_examples examples of noise (common/data/
// synthetic.h) shaped as model.input_shape (default [1, 28, 28]) with
// model.num_classes classes (default 10): for throughput, not accuracy.
#include "common/data/synthetic.h"

#include "common/data/data_source.h"

namespace pstrain {
namespace {

absl::StatusOr<Datasets> Load(const ExperimentConfig& config, bool with_test) {
  const ModelConfig& mc = config.model();
  const DataConfig& dc = config.data();
  const Shape shape =
      mc.input_shape_size() == 3 ? Shape(mc.input_shape().begin(), mc.input_shape().end()) : Shape{1, 28, 28};
  const int classes = mc.has_num_classes() ? mc.num_classes() : 10;
  Datasets data;
  data.train = MakeSyntheticDataset(dc.synthetic_examples(), shape, classes, dc.shuffle_seed());
  data.train.random_labels = true;
  if (with_test) {
    data.test = MakeSyntheticDataset(dc.synthetic_examples(), shape, classes, dc.shuffle_seed() + 1);
    data.test.random_labels = true;
  }
  return data;
}

absl::Status Check(const ExperimentConfig& config, const ConfigChecker& ck) {
  return ck.Positive("data.synthetic_examples", config.data().synthetic_examples());
}

const bool kRegistered = DataSourceRegistry().Register("synthetic", {Load, Check});

}  // namespace
}  // namespace pstrain
