#include "common/data/dataset.h"

#include "absl/strings/str_cat.h"

namespace pstrain {

int64_t ExampleSize(const Dataset& data) { return NumElements(data.example_shape); }

absl::Status ValidateDataset(const Dataset& data) {
  if (data.num_examples < 0)
    return absl::InvalidArgumentError(absl::StrCat("negative num_examples ", data.num_examples));
  if (data.example_shape.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("example_shape must be [C,H,W], got ", ShapeToString(data.example_shape)));
  }
  for (int64_t d : data.example_shape) {
    if (d <= 0)
      return absl::InvalidArgumentError(absl::StrCat("bad example_shape ", ShapeToString(data.example_shape)));
  }
  if (data.num_classes <= 0)
    return absl::InvalidArgumentError(absl::StrCat("num_classes must be > 0, got ", data.num_classes));
  if (data.encoded()) {
    if (!data.images.empty() || !data.labels.empty()) {
      return absl::InvalidArgumentError("an encoded dataset holds no decoded images or labels");
    }
    if (data.decoder->num_examples() != data.num_examples) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_examples ", data.num_examples, " but the decoder holds ", data.decoder->num_examples()));
    }
    return absl::OkStatus();
  }
  const int64_t want_images = data.num_examples * ExampleSize(data);
  if (static_cast<int64_t>(data.images.size()) != want_images) {
    return absl::InvalidArgumentError(absl::StrCat("images holds ", data.images.size(), " floats; ", data.num_examples,
                                                   " examples of shape ", ShapeToString(data.example_shape), " need ",
                                                   want_images));
  }
  if (static_cast<int64_t>(data.labels.size()) != data.num_examples) {
    return absl::InvalidArgumentError(
        absl::StrCat("labels holds ", data.labels.size(), " entries for ", data.num_examples, " examples"));
  }
  if (data.sparse_features < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative sparse_features ", data.sparse_features));
  }
  if (data.bag_size < 1) return absl::InvalidArgumentError(absl::StrCat("bag_size ", data.bag_size, " is not >= 1"));
  const int64_t want_ids = data.num_examples * data.sparse_features * data.bag_size;
  if (static_cast<int64_t>(data.sparse_ids.size()) != want_ids) {
    return absl::InvalidArgumentError(absl::StrCat("sparse_ids holds ", data.sparse_ids.size(), " ids; ",
                                                   data.num_examples, " examples of ", data.sparse_features,
                                                   " sparse features in bags of ", data.bag_size, " need ", want_ids));
  }
  for (size_t i = 0; i < data.labels.size(); ++i) {
    if (data.labels[i] < 0 || data.labels[i] >= data.num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", data.labels[i], " of example ", i, " is outside [0, ", data.num_classes, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain
