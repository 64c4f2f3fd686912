// Reading the features of a tf.train.Example (proto/tf_example.proto) by
// key, for the parsers of the Examples pstrain reads (image_example.h,
// common/data/criteo/ctr_tf_example.h). Their refusals are
// INVALID_ARGUMENT "tf.train.Example: <key>: <what is wrong>".
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/tf_example.pb.h"

namespace pstrain::data {

using FeatureMap = google::protobuf::Map<std::string, tfexample::Feature>;

// INVALID_ARGUMENT "tf.train.Example: <key>: <what>".
absl::Status InvalidFeature(absl::string_view key, absl::string_view what);

// Parses `serialized` into `example`: INVALID_ARGUMENT "not a
// tf.train.Example (<n> bytes)" when the bytes do not parse as one.
absl::Status ParseExample(absl::string_view serialized, tfexample::Example* example);

// The feature `key` when it holds a list of `kind`: nullptr when it is
// absent (or set to no list) and not `required`; an error when it holds
// another kind of list, or is required and absent.
absl::StatusOr<tfexample::Feature*> FindFeature(FeatureMap& features, const char* key,
                                                tfexample::Feature::KindCase kind, bool required);

// `count` values are one, or none for a key not `required`.
absl::Status CheckOneValue(const char* key, int count, bool required);

// An int64 key of one value into `out` (left alone when absent).
absl::Status GetInt64(FeatureMap& features, const char* key, bool required, int64_t* out);

// Appends `value` to the int64 list of `key`.
void SetInt64(FeatureMap& features, const char* key, int64_t value);

}  // namespace pstrain::data
