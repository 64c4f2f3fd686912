// Fuzz target: tf.train.Example images (common/data/records/image_example.h).
//
// Feeds: the input as a serialized Example to ParseImageExample.
// Asserts: a refused input is INVALID_ARGUMENT with a message starting
// "not a tf.train.Example" or "tf.train.Example: image/" (naming the key); an
// accepted one has whole bbox quadruples, and SerializeImageExample of it
// parses back to the same image.
// Seeds: tests/fuzz/corpus/tf_example/ (Examples with the keys TensorFlow's
// build_imagenet_data.py writes, with and without boxes; a label of the
// wrong type).
#include <cstdint>
#include <cstring>
#include <string>

#include "common/data/records/image_example.h"
#include "tests/fuzz/fuzz_util.h"

using pstrain::data::ImageExample;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ImageExample> image = pstrain::data::ParseImageExample(bytes);
  if (!image.ok()) {
    const absl::string_view message = image.status().message();
    FUZZ_CHECK(absl::IsInvalidArgument(image.status()) && (message.substr(0, 22) == "not a tf.train.Example" ||
                                                           message.substr(0, 24) == "tf.train.Example: image/"),
               "refused with ", image.status().ToString());
    return 0;
  }
  FUZZ_CHECK(image->bbox.size() % 4 == 0, image->bbox.size(), " bbox values");
  absl::StatusOr<ImageExample> again = pstrain::data::ParseImageExample(pstrain::data::SerializeImageExample(*image));
  FUZZ_CHECK(again.ok(), "a serialized image does not parse: ", again.status().ToString());
  // Compare bbox bit for bit: NaN != NaN.
  const bool same_boxes = again->bbox.size() == image->bbox.size() &&
                          (image->bbox.empty() || std::memcmp(again->bbox.data(), image->bbox.data(),
                                                              image->bbox.size() * sizeof(float)) == 0);
  FUZZ_CHECK(again->encoded == image->encoded && again->label == image->label && again->format == image->format &&
                 again->height == image->height && again->width == image->width && same_boxes,
             "the round trip changed the image");
  return 0;
}
