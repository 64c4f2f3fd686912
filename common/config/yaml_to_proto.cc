#include "common/config/yaml_to_proto.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "proto/yaml_options.pb.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace pstrain {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The field a scalar written for a message of this type sets (the
// message's yaml_scalar_field option), or null when it takes maps only.
const FieldDescriptor* ScalarShorthand(const Descriptor* desc) {
  const std::string& name = desc->options().GetExtension(yaml_scalar_field);
  return name.empty() ? nullptr : desc->FindFieldByName(name);
}

// 1-based line of `node`, or `fallback` when yaml-cpp recorded none.
int LineOf(const YAML::Node& node, int fallback) {
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? fallback : mark.line + 1;
}

// How a YAML value reads in "got ..." phrases.
std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Scalar: {
      std::string s = node.Scalar();
      if (s.size() > 80) s = s.substr(0, 77) + "...";
      return absl::StrCat("'", s, "'");
    }
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "an undefined value";
  }
}

// Edit distance, for "did you mean" hints on unknown keys.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

bool LooksLikeInteger(absl::string_view s) {
  s = absl::StripAsciiWhitespace(s);
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(c); });
}

// yaml-cpp reports a tab in indentation as a bare syntax error; say why.
std::string TabHint(std::string_view yaml, const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  size_t begin = 0;
  for (int line = 0; line < mark.line && begin != std::string_view::npos; ++line) {
    begin = yaml.find('\n', begin);
    if (begin != std::string_view::npos) ++begin;
  }
  if (begin == std::string_view::npos) return "";
  const std::string_view text = yaml.substr(begin, yaml.find('\n', begin) - begin);
  const size_t indent_end = text.find_first_not_of(" \t");
  if (text.substr(0, indent_end).find('\t') == std::string_view::npos) return "";
  return " (YAML indentation must use spaces, not tabs)";
}

// Walks one YAML document into a message. Holds only the file name.
class YamlWalker {
 public:
  explicit YamlWalker(std::string_view filename) : filename_(filename) {}

  // `node` must be a map (or null) of `message`'s fields. `path` is the dotted
  // path of `message` itself ("" at the top level).
  absl::Status WalkMessage(const YAML::Node& node, const std::string& path, int line, Message* message) const {
    const Descriptor* desc = message->GetDescriptor();
    if (node.IsNull()) return absl::OkStatus();
    if (!node.IsMap() && path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(Where(LineOf(node, line)), " expected a map of ", desc->name(),
                                                     " fields at the top level, got ", Describe(node)));
    }
    if (!node.IsMap()) {
      return FieldError(LineOf(node, line), path, absl::StrCat("a map of ", desc->name(), " fields"), Describe(node));
    }
    std::map<std::string, int> seen;  // field name -> line it was first given on
    for (const auto& kv : node) {
      const YAML::Node& key = kv.first;
      const YAML::Node& value = kv.second;
      const int key_line = LineOf(key, line);
      const std::string name = key.IsScalar() ? key.Scalar() : Describe(key);
      const std::string field_path = path.empty() ? name : absl::StrCat(path, ".", name);
      const FieldDescriptor* field = key.IsScalar() ? desc->FindFieldByName(name) : nullptr;
      if (field == nullptr) return UnknownField(key_line, path, name, desc);
      if (auto [it, inserted] = seen.emplace(name, key_line); !inserted) {
        return FieldError(key_line, field_path, "each key once",
                          absl::StrCat("it again (first given on line ", it->second, ")"));
      }
      // A null value's mark points past the key, often to the next line.
      const int value_line = value.IsNull() ? key_line : LineOf(value, key_line);
      PSTRAIN_RETURN_IF_ERROR(WalkField(value, field_path, value_line, field, message));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status WalkField(const YAML::Node& value, const std::string& path, int line, const FieldDescriptor* field,
                         Message* message) const {
    const Reflection* refl = message->GetReflection();
    if (!field->is_repeated()) {
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        Message* nested = refl->MutableMessage(message, field);
        const FieldDescriptor* shorthand = ScalarShorthand(field->message_type());
        if (shorthand != nullptr && value.IsScalar()) {
          return SetScalar(value, absl::StrCat(path, ".", shorthand->name()), line, shorthand, nested);
        }
        return WalkMessage(value, path, line, nested);
      }
      return SetScalar(value, path, line, field, message);
    }
    refl->ClearField(message, field);
    if (value.IsNull()) return absl::OkStatus();
    if (!value.IsSequence()) {
      return FieldError(line, path, absl::StrCat("a list of ", TypeWord(field), " values"), Describe(value));
    }
    for (size_t i = 0; i < value.size(); ++i) {
      const YAML::Node item = value[i];
      const std::string item_path = absl::StrCat(path, "[", i, "]");
      const int item_line = LineOf(item, line);
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        PSTRAIN_RETURN_IF_ERROR(WalkMessage(item, item_path, item_line, refl->AddMessage(message, field)));
      } else {
        PSTRAIN_RETURN_IF_ERROR(SetScalar(item, item_path, item_line, field, message));
      }
    }
    return absl::OkStatus();
  }

  // Converts a scalar node by the field's type; sets it (singular) or appends
  // it (repeated).
  absl::Status SetScalar(const YAML::Node& node, const std::string& path, int line, const FieldDescriptor* field,
                         Message* message) const {
    if (!node.IsScalar()) {
      return FieldError(line, path, ExpectedWord(field), Describe(node));
    }
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
        return SetInteger(node, path, line, field, message);
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
        return SetUnsigned(node, path, line, field, message);
      case FieldDescriptor::CPPTYPE_FLOAT:
      case FieldDescriptor::CPPTYPE_DOUBLE:
        return SetNumber(node, path, line, field, message);
      case FieldDescriptor::CPPTYPE_BOOL:
        return SetBool(node, path, line, field, message);
      case FieldDescriptor::CPPTYPE_STRING: {
        const Reflection* refl = message->GetReflection();
        field->is_repeated() ? refl->AddString(message, field, node.Scalar())
                             : refl->SetString(message, field, node.Scalar());
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_ENUM:
        return SetEnum(node, path, line, field, message);
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return absl::InternalError("SetScalar called on a message field");
    }
    return absl::OkStatus();
  }

  // The SetScalar of an int32 or int64 field: an integer in the type's range.
  absl::Status SetInteger(const YAML::Node& node, const std::string& path, int line, const FieldDescriptor* field,
                          Message* message) const {
    const Reflection* refl = message->GetReflection();
    const bool rep = field->is_repeated();
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
      PSTRAIN_ASSIGN_OR_RETURN(int64_t v, ParseInt(node, path, line, std::numeric_limits<int32_t>::min(),
                                                   std::numeric_limits<int32_t>::max()));
      rep ? refl->AddInt32(message, field, static_cast<int32_t>(v))
          : refl->SetInt32(message, field, static_cast<int32_t>(v));
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(int64_t v, ParseInt(node, path, line, std::numeric_limits<int64_t>::min(),
                                                   std::numeric_limits<int64_t>::max()));
      rep ? refl->AddInt64(message, field, v) : refl->SetInt64(message, field, v);
    }
    return absl::OkStatus();
  }

  // The SetScalar of a uint32 or uint64 field: a non-negative integer in the
  // type's range.
  absl::Status SetUnsigned(const YAML::Node& node, const std::string& path, int line, const FieldDescriptor* field,
                           Message* message) const {
    const Reflection* refl = message->GetReflection();
    const bool rep = field->is_repeated();
    const bool is32 = field->cpp_type() == FieldDescriptor::CPPTYPE_UINT32;
    const uint64_t max = is32 ? std::numeric_limits<uint32_t>::max() : std::numeric_limits<uint64_t>::max();
    uint64_t v = 0;
    if (!absl::SimpleAtoi(node.Scalar(), &v) || v > max) {
      return FieldError(line, path, absl::StrCat("a non-negative integer in [0, ", max, "]"), Describe(node));
    }
    if (is32) {
      rep ? refl->AddUInt32(message, field, static_cast<uint32_t>(v))
          : refl->SetUInt32(message, field, static_cast<uint32_t>(v));
    } else {
      rep ? refl->AddUInt64(message, field, v) : refl->SetUInt64(message, field, v);
    }
    return absl::OkStatus();
  }

  // The SetScalar of a float or double field: a finite number, within a
  // float's range for a float field.
  absl::Status SetNumber(const YAML::Node& node, const std::string& path, int line, const FieldDescriptor* field,
                         Message* message) const {
    const Reflection* refl = message->GetReflection();
    const bool rep = field->is_repeated();
    double v = 0;
    if (!absl::SimpleAtod(node.Scalar(), &v) || !std::isfinite(v)) {
      return FieldError(line, path, "a finite number", Describe(node));
    }
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
      rep ? refl->AddDouble(message, field, v) : refl->SetDouble(message, field, v);
      return absl::OkStatus();
    }
    // Values below FLT_MAX + half an ulp round to FLT_MAX (the shortest
    // text of FLT_MAX, "3.4028235e+38", is slightly above it).
    constexpr double kFloatLimit = 0x1.ffffffp+127;
    if (std::fabs(v) >= kFloatLimit) {
      return FieldError(line, path, "a number within the range of a 32-bit float", Describe(node));
    }
    rep ? refl->AddFloat(message, field, static_cast<float>(v)) : refl->SetFloat(message, field, static_cast<float>(v));
    return absl::OkStatus();
  }

  // The SetScalar of a bool field: true/yes/on or false/no/off, any case.
  absl::Status SetBool(const YAML::Node& node, const std::string& path, int line, const FieldDescriptor* field,
                       Message* message) const {
    const std::string lower = absl::AsciiStrToLower(node.Scalar());
    bool v;
    if (lower == "true" || lower == "yes" || lower == "on") {
      v = true;
    } else if (lower == "false" || lower == "no" || lower == "off") {
      v = false;
    } else {
      return FieldError(line, path, "true or false", Describe(node));
    }
    const Reflection* refl = message->GetReflection();
    field->is_repeated() ? refl->AddBool(message, field, v) : refl->SetBool(message, field, v);
    return absl::OkStatus();
  }

  // The SetScalar of an enum field: one of its value names.
  absl::Status SetEnum(const YAML::Node& node, const std::string& path, int line, const FieldDescriptor* field,
                       Message* message) const {
    const EnumValueDescriptor* v = field->enum_type()->FindValueByName(node.Scalar());
    if (v == nullptr) return FieldError(line, path, ExpectedWord(field), Describe(node));
    const Reflection* refl = message->GetReflection();
    field->is_repeated() ? refl->AddEnum(message, field, v) : refl->SetEnum(message, field, v);
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> ParseInt(const YAML::Node& node, const std::string& path, int line, int64_t min,
                                   int64_t max) const {
    int64_t v = 0;
    if (absl::SimpleAtoi(node.Scalar(), &v) && v >= min && v <= max) return v;
    if (LooksLikeInteger(node.Scalar())) {
      return FieldError(line, path, absl::StrCat("an integer in [", min, ", ", max, "]"), Describe(node));
    }
    return FieldError(line, path, "an integer", Describe(node));
  }

  // "an integer", "a string", ... for the field's element type.
  static std::string ExpectedWord(const FieldDescriptor* field) {
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
        return "an integer";
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
        return "a non-negative integer";
      case FieldDescriptor::CPPTYPE_FLOAT:
      case FieldDescriptor::CPPTYPE_DOUBLE:
        return "a number";
      case FieldDescriptor::CPPTYPE_BOOL:
        return "true or false";
      case FieldDescriptor::CPPTYPE_STRING:
        return "a string";
      case FieldDescriptor::CPPTYPE_ENUM: {
        std::vector<std::string> names;
        for (int i = 0; i < field->enum_type()->value_count(); ++i) {
          names.push_back(field->enum_type()->value(i)->name());
        }
        return absl::StrCat("one of ", absl::StrJoin(names, ", "));
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return absl::StrCat("a map of ", field->message_type()->name(), " fields");
    }
    return "a value";
  }

  // "integer", "string", ... as used in "a list of X values".
  static std::string TypeWord(const FieldDescriptor* field) {
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
        return "integer";
      case FieldDescriptor::CPPTYPE_FLOAT:
      case FieldDescriptor::CPPTYPE_DOUBLE:
        return "number";
      case FieldDescriptor::CPPTYPE_BOOL:
        return "boolean";
      case FieldDescriptor::CPPTYPE_STRING:
        return "string";
      case FieldDescriptor::CPPTYPE_ENUM:
        return field->enum_type()->name();
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return field->message_type()->name();
    }
    return "";
  }

  absl::Status FieldError(int line, absl::string_view path, absl::string_view expected, absl::string_view got) const {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(line), " field '", path, "': expected ", expected, ", got ", got));
  }

  absl::Status UnknownField(int line, const std::string& parent_path, const std::string& name,
                            const Descriptor* desc) const {
    // Suggest the closest key: a whole-name typo, else a typo in a prefix
    // ("batch_sise" -> "batch_size_per_device").
    std::vector<std::string> keys;
    std::string best;
    size_t best_distance = std::string::npos;
    std::string best_prefix;
    size_t best_prefix_distance = std::string::npos;
    for (int i = 0; i < desc->field_count(); ++i) {
      const std::string& key = desc->field(i)->name();
      keys.push_back(key);
      const size_t d = EditDistance(name, key);
      if (d < best_distance) {
        best_distance = d;
        best = key;
      }
      if (key.size() > name.size()) {
        const size_t p = EditDistance(name, std::string_view(key).substr(0, name.size()));
        if (p < best_prefix_distance) {
          best_prefix_distance = p;
          best_prefix = key;
        }
      }
    }
    const std::string path = parent_path.empty() ? name : absl::StrCat(parent_path, ".", name);
    std::string hint;
    if (best_distance <= std::max<size_t>(2, name.size() / 3)) {
      hint = absl::StrCat(" (did you mean '", best, "'?)");
    } else if (name.size() >= 4 && best_prefix_distance <= 1) {
      hint = absl::StrCat(" (did you mean '", best_prefix, "'?)");
    }
    const std::string owner = parent_path.empty() ? std::string("top-level") : absl::StrCat("'", parent_path, "'");
    return absl::InvalidArgumentError(absl::StrCat(Where(line), " unknown field '", path, "'", hint,
                                                   "; the valid keys of ", owner, " (", desc->name(),
                                                   ") are: ", absl::StrJoin(keys, ", ")));
  }

  std::string Where(int line) const {
    return line > 0 ? absl::StrCat(filename_, ":", line, ":") : absl::StrCat(filename_, ":");
  }

  std::string filename_;
};

// Where each document of a YAML text starts (the mark of its first event).
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;

  void OnDocumentStart(const YAML::Mark&) override { in_document_ = false; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Note(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Note(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override { Note(mark); }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Note(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Note(mark);
  }
  void OnMapEnd() override {}

 private:
  void Note(const YAML::Mark& mark) {
    if (!in_document_) starts.push_back(mark);
    in_document_ = true;
  }
  bool in_document_ = false;
};

// The number of documents in `yaml`. yaml-cpp's own LoadAll never returns on
// some malformed text (a ',' at the top level: its parser then yields empty
// documents forever without reading on), so documents are counted here and
// one that starts where the previous one did is an error at that character.
// Throws YAML::Exception as the parser does.
absl::StatusOr<int> CountDocuments(std::string_view yaml, absl::string_view file) {
  std::istringstream in{std::string(yaml)};
  YAML::Parser parser(in);
  DocumentStarts starts;
  int docs = 0;
  while (parser.HandleNextDocument(starts)) {
    ++docs;
    if (static_cast<size_t>(docs) > yaml.size() + 1) {  // every document but an empty text's takes a character
      return absl::InvalidArgumentError(absl::StrCat(file, ": invalid YAML: the parser does not advance"));
    }
    const size_t n = starts.starts.size();
    if (n >= 2 && starts.starts[n - 1].pos <= starts.starts[n - 2].pos) {
      const YAML::Mark& at = starts.starts[n - 1];
      const std::string found = at.pos >= 0 && static_cast<size_t>(at.pos) < yaml.size()
                                    ? QuoteString(absl::string_view(yaml.data() + at.pos, 1))
                                    : "end of text";
      return absl::InvalidArgumentError(absl::StrCat(file, ":", at.line + 1, ":", at.column + 1,
                                                     ": invalid YAML: unexpected ", found, " outside any value"));
    }
  }
  return docs;
}

}  // namespace

absl::Status ParseYamlIntoMessage(std::string_view yaml, std::string_view filename,
                                  google::protobuf::Message* message) {
  const absl::string_view file(filename.data(), filename.size());
  std::vector<YAML::Node> docs;
  try {
    PSTRAIN_ASSIGN_OR_RETURN(const int count, CountDocuments(yaml, file));
    if (count > 0) docs = YAML::LoadAll(std::string(yaml));
  } catch (const YAML::Exception& e) {
    const std::string where = e.mark.is_null() ? absl::StrCat(file, ":")
                                               : absl::StrCat(file, ":", e.mark.line + 1, ":", e.mark.column + 1, ":");
    return absl::InvalidArgumentError(absl::StrCat(where, " invalid YAML: ", e.msg, TabHint(yaml, e.mark)));
  }
  if (docs.empty()) return absl::OkStatus();
  if (docs.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(file, ":", LineOf(docs[1], 0), ": expected one YAML document, got ",
                                                   docs.size(), " (remove the '---' separators)"));
  }
  try {
    return YamlWalker(filename).WalkMessage(docs[0], "", 1, message);
  } catch (const YAML::Exception& e) {
    // Not expected after a successful load; reported rather than thrown.
    return absl::InvalidArgumentError(absl::StrCat(file, ": invalid YAML: ", e.msg));
  }
}

}  // namespace pstrain
