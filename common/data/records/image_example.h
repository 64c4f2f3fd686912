// One labelled image as a tf.train.Example (proto/tf_example.proto), with
// the feature keys of TensorFlow's ImageNet conversion scripts
// (build_imagenet_data.py and the models' imagenet_to_gcs.py):
//   image/encoded             bytes, 1 value     the JPEG/PNG file (required)
//   image/class/label         int64, 1 value     the class (required)
//   image/format              bytes, 1 value     "JPEG", "PNG" (optional)
//   image/height, image/width int64, 1 value     pixels (optional)
//   image/channels            int64, 1 value     1 (grey) or 3 (optional)
//   image/object/bbox/xmin, ymin, xmax, ymax
//                             float lists of one length, normalised to [0, 1]
//                             (optional; all four or none)
// Other keys (image/filename, image/class/text, image/colorspace, ...) are
// ignored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain::data {

struct ImageExample {
  std::string encoded;  // the image file's bytes
  int64_t label = 0;
  std::string format;  // empty when the Example has none
  int64_t height = 0;  // 0 when the Example has none
  int64_t width = 0;
  int64_t channels = 0;  // 0 when the Example has none
  // Bounding boxes as xmin, ymin, xmax, ymax quadruples, normalised.
  std::vector<float> bbox;
};

// Parses a serialized tf.train.Example. INVALID_ARGUMENT "not a
// tf.train.Example" when the bytes do not parse as one, or naming the key
// that is missing, holds another kind of list than the table says, or holds
// the wrong number of values (an optional key with an empty or unset list
// counts as absent; the four bbox lists must be equally long). Never
// crashes, whatever the bytes.
absl::StatusOr<ImageExample> ParseImageExample(absl::string_view serialized);

// The Example holding `image`'s keys: encoded and label always, format when
// not empty, height and width when not 0, the bbox lists when `image.bbox`
// is not empty (its whole quadruples; a trailing partial one is dropped).
std::string SerializeImageExample(const ImageExample& image);

}  // namespace pstrain::data
