// YAML <-> protobuf message, driven by the message's descriptor.
//
// Reading (ParseYamlIntoMessage): the YAML document must be a map whose keys
// are exactly the message's field names; nested messages are maps, repeated
// fields are sequences, scalars are converted by the field's type with range
// checks. Fields not mentioned keep their schema defaults (they stay unset).
// An empty document (or one that is only comments) leaves the message
// untouched.
//
// Null values: for a message field they mean an empty message, for a
// repeated field an empty list; for a scalar field they are an error.
//
// Every error is absl::InvalidArgumentError of the form
//   <filename>:<line>: field '<dotted.path>': expected <what>, got <found>
// with 1-based lines; unknown keys list the valid keys of their message.
//
// Writing (MessageToYaml): the fields that are set, in field-number order;
// ParseYamlIntoMessage reads the text back into an equal message.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace google::protobuf {
class Message;
}

namespace pstrain {

// Parses `yaml` (named `filename` in errors) into `message`, which is merged
// into (not cleared first). On error `message` may be partly filled.
absl::Status ParseYamlIntoMessage(std::string_view yaml, std::string_view filename, google::protobuf::Message* message);

// The fields set in `message` as a YAML document (ending in a newline):
// nested messages as block maps indented by two spaces, repeated scalars as
// flow lists ("hidden_units: [128, 32]"), repeated messages as block lists
// ("- key: value"), a set but empty message as "{}". Strings are written
// plain when YAML reads them back as the same string (identifiers, paths,
// host:port) and double-quoted with escapes otherwise ("", "null", "yes",
// "0.5", "a: b", "[::1]:2222", text with spaces or quotes). Numbers use the
// shortest form that reads back exactly; enums their value names. A message
// with no field set is "{}".
std::string MessageToYaml(const google::protobuf::Message& message);

}  // namespace pstrain
