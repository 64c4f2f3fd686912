// One click-log example as a tf.train.Example (proto/tf_example.proto):
// Criteo-shaped data (criteo_record.h) whose categorical features may hold
// several ids each (multi-hot bags), as TensorFlow CTR pipelines write it:
//
//   label      int64 (0 or 1) or float (0.0 or 1.0), 1 value   required
//   I1 .. I13  int64, 1 value                  absent or empty: missing
//   C1 .. C26  int64 list: the feature's bag   absent or empty: missing
//
// An id is its int64 value's bits read as uint64 (hashed ids of any sign);
// -1 (every bit set) is reserved for a missing feature. A bag holds at most
// kMaxCtrBag ids. Other keys are ignored.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/data/criteo/criteo_record.h"
#include "common/data/criteo/synthetic_ctr.h"

namespace pstrain::criteo {

inline constexpr int kMaxCtrBag = 1024;

struct CtrTfExample {
  // The label and I1-I13; C_f is bag f's first id (missing when it is empty).
  CriteoRecord record;
  CtrBags bags;  // every id of every feature, in the Example's order
};

// Parses a serialized tf.train.Example. INVALID_ARGUMENT "not a
// tf.train.Example" when the bytes do not parse as one, or
// "tf.train.Example: <key>: <what>" naming the key that is missing (label),
// holds another kind of list or count of values than the table says, a
// label other than 0 or 1, the reserved id -1, or a bag longer than
// kMaxCtrBag. Never crashes, whatever the bytes.
absl::StatusOr<CtrTfExample> ParseCtrTfExample(absl::string_view serialized);

// The Example of `example`: the label as int64, present dense values and
// non-empty bags. The label must be 0 or 1 (CHECK).
std::string SerializeCtrTfExample(const CtrTfExample& example);

}  // namespace pstrain::criteo
