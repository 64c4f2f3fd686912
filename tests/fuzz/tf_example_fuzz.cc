// Fuzz target: the tf.train.Examples pstrain reads -- images
// (common/data/records/image_example.h) and click logs
// (common/data/criteo/ctr_tf_example.h).
//
// Feeds: the input as a serialized Example to ParseImageExample and to
// ParseCtrTfExample.
// Asserts: a refused input is INVALID_ARGUMENT with a message starting
// "not a tf.train.Example" or "tf.train.Example: " and the key (image/...;
// label, I<n> or C<n>); an accepted image has whole bbox quadruples, and
// SerializeImageExample of it parses back to the same image; an accepted
// click log has bags of at most kMaxCtrBag ids, none of them the reserved
// -1, and SerializeCtrTfExample of it parses back to the same example.
// Seeds: tests/fuzz/corpus/tf_example/ (Examples with the keys TensorFlow's
// build_imagenet_data.py writes, with and without boxes; a label of the
// wrong type; click logs with bags, missing features and a float label).
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "common/data/criteo/ctr_tf_example.h"
#include "common/data/records/image_example.h"
#include "tests/fuzz/fuzz_util.h"

using pstrain::criteo::CtrTfExample;
using pstrain::data::ImageExample;

namespace {

bool RefusedAsAnExample(const absl::Status& status, absl::string_view keys) {
  const absl::string_view message = status.message();
  return absl::IsInvalidArgument(status) && (absl::StartsWith(message, "not a tf.train.Example") ||
                                             absl::StartsWith(message, absl::StrCat("tf.train.Example: ", keys)));
}

void CheckClickLog(absl::string_view bytes) {
  absl::StatusOr<CtrTfExample> example = pstrain::criteo::ParseCtrTfExample(bytes);
  if (!example.ok()) {
    const bool named = RefusedAsAnExample(example.status(), "label") || RefusedAsAnExample(example.status(), "I") ||
                       RefusedAsAnExample(example.status(), "C");
    FUZZ_CHECK(named, "click log refused with ", example.status().ToString());
    return;
  }
  const pstrain::criteo::CtrBags& bags = example->bags;
  for (int f = 0; f < pstrain::criteo::kNumCategorical; ++f) {
    FUZZ_CHECK(bags.bag(f).size() <= pstrain::criteo::kMaxCtrBag, "bag C", f + 1, " of ", bags.bag(f).size());
    for (uint64_t id : bags.bag(f)) FUZZ_CHECK(id != ~uint64_t{0}, "the reserved id in C", f + 1);
    FUZZ_CHECK(example->record.categorical[f].has_value() == !bags.bag(f).empty(), "C", f + 1, " first id");
  }
  absl::StatusOr<CtrTfExample> again =
      pstrain::criteo::ParseCtrTfExample(pstrain::criteo::SerializeCtrTfExample(*example));
  FUZZ_CHECK(again.ok(), "a serialized click log does not parse: ", again.status().ToString());
  FUZZ_CHECK(again->record == example->record && again->bags.ids == bags.ids && again->bags.begin == bags.begin,
             "the round trip changed the click log");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  CheckClickLog(bytes);
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
