// MessageToYaml (yaml_to_proto.h): a message's set fields as YAML that
// ParseYamlIntoMessage reads back into an equal message.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/yaml_to_proto.h"
#include "common/quote.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace pstrain {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Words a YAML reader may take for null, a boolean or a number rather than a
// string.
bool IsReservedWord(absl::string_view s) {
  static constexpr const char* kWords[] = {"null", "true", "false", "yes", "no", "on", "off", "y", "n", ".inf", ".nan"};
  const std::string lower = absl::AsciiStrToLower(s);
  return std::find(std::begin(kWords), std::end(kWords), lower) != std::end(kWords);
}

// Plain scalars are kept to a set that every YAML reader takes back as the
// same string, in block and flow context alike: a letter, '_', '/' or '.' (not
// before a digit: ".5" is a number) first; then letters, digits and _ . / -;
// a ':' only between two of those (host:port).
bool CanBePlain(absl::string_view s) {
  if (s.empty() || IsReservedWord(s)) return false;
  if (!absl::ascii_isalpha(s[0]) && s[0] != '_' && s[0] != '/' && s[0] != '.') return false;
  if (s[0] == '.' && s.size() > 1 && absl::ascii_isdigit(s[1])) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-') continue;
    if (c == ':' && i + 1 < s.size() && s[i - 1] != ':' && s[i + 1] != ':') continue;
    return false;
  }
  return true;
}

std::string YamlString(absl::string_view s) { return CanBePlain(s) ? std::string(s) : QuoteString(s); }

// Shortest text that reads back as exactly `value` (float or double).
template <typename T>
std::string YamlNumber(T value) {
  if (std::isnan(value)) return ".nan";
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// One scalar value of `field` (index < 0: the singular field) as YAML text.
std::string ScalarToYaml(const Message& message, const FieldDescriptor* field, int index) {
  const Reflection* r = message.GetReflection();
  const bool rep = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(rep ? r->GetRepeatedInt32(message, field, index) : r->GetInt32(message, field));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(rep ? r->GetRepeatedInt64(message, field, index) : r->GetInt64(message, field));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(rep ? r->GetRepeatedUInt32(message, field, index) : r->GetUInt32(message, field));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(rep ? r->GetRepeatedUInt64(message, field, index) : r->GetUInt64(message, field));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return YamlNumber(rep ? r->GetRepeatedFloat(message, field, index) : r->GetFloat(message, field));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return YamlNumber(rep ? r->GetRepeatedDouble(message, field, index) : r->GetDouble(message, field));
    case FieldDescriptor::CPPTYPE_BOOL:
      return (rep ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field)) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return YamlString((rep ? r->GetRepeatedEnum(message, field, index) : r->GetEnum(message, field))->name());
    case FieldDescriptor::CPPTYPE_STRING:
      return YamlString(rep ? r->GetRepeatedString(message, field, index) : r->GetString(message, field));
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return "";
}

// Appends the set fields of `message` as "key: value" lines indented by
// `indent` spaces.
void AppendFields(const Message& message, int indent, std::string* out) {
  const Reflection* r = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(message, &fields);
  const std::string pad(indent, ' ');
  for (const FieldDescriptor* field : fields) {
    absl::StrAppend(out, pad, field->name(), ":");
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      if (!field->is_repeated()) {
        absl::StrAppend(out, " ", ScalarToYaml(message, field, -1), "\n");
        continue;
      }
      std::vector<std::string> items;
      for (int i = 0; i < r->FieldSize(message, field); ++i) items.push_back(ScalarToYaml(message, field, i));
      absl::StrAppend(out, " [", absl::StrJoin(items, ", "), "]\n");
      continue;
    }
    if (!field->is_repeated()) {
      std::string body;
      AppendFields(r->GetMessage(message, field), indent + 2, &body);
      absl::StrAppend(out, body.empty() ? " {}\n" : absl::StrCat("\n", body));
      continue;
    }
    // "- " takes the place of the first line's last two spaces of indentation.
    out->push_back('\n');
    for (int i = 0; i < r->FieldSize(message, field); ++i) {
      std::string body;
      AppendFields(r->GetRepeatedMessage(message, field, i), indent + 4, &body);
      if (body.empty()) {
        absl::StrAppend(out, pad, "  - {}\n");
      } else {
        body.replace(indent + 2, 2, "- ");
        absl::StrAppend(out, body);
      }
    }
  }
}

}  // namespace

std::string MessageToYaml(const google::protobuf::Message& message) {
  std::string out;
  AppendFields(message, 0, &out);
  return out.empty() ? "{}\n" : out;
}

}  // namespace pstrain
