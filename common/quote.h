// One way to write a string as a double-quoted literal that JSON and YAML
// (1.2, a superset of JSON) both read back to the same bytes: result.json and
// the YAML configs pstrain writes use it.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace pstrain {

// `s` in double quotes: '"' and '\' escaped, \n \r \t \b \f as such, other
// control bytes and DEL as \u00XX; bytes >= 0x80 pass through (the text is
// UTF-8).
std::string QuoteString(absl::string_view s);

}  // namespace pstrain
