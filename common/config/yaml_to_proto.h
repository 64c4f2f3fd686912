// YAML -> protobuf message, driven by the message's descriptor.
//
// The YAML document must be a map whose keys are exactly the message's field
// names; nested messages are maps, repeated fields are sequences, scalars are
// converted by the field's type with range checks. Fields not mentioned keep
// their schema defaults (they stay unset). An empty document (or one that is
// only comments) leaves the message untouched.
//
// Null values: for a message field they mean an empty message, for a
// repeated field an empty list; for a scalar field they are an error.
//
// Every error is absl::InvalidArgumentError of the form
//   <filename>:<line>: field '<dotted.path>': expected <what>, got <found>
// with 1-based lines; unknown keys list the valid keys of their message.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace google::protobuf {
class Message;
}

namespace pstrain {

// Parses `yaml` (named `filename` in errors) into `message`, which is merged
// into (not cleared first). On error `message` may be partly filled.
absl::Status ParseYamlIntoMessage(std::string_view yaml, std::string_view filename,
                                  google::protobuf::Message* message);

}  // namespace pstrain
