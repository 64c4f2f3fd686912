#include "tools/compare/matrix.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/config/config_loader.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace pstrain::compare {
namespace {

namespace fs = std::filesystem;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr const char* kMatrixKeys[] = {"name", "description", "base", "overrides", "baseline", "variants"};
constexpr const char* kVariantKeys[] = {"label", "set", "workers", "ps"};

// Scalars tagged "!" (quoted in the matrix) are emitted double-quoted, as
// the user wrote them; everything else as written.
constexpr char kQuotedTag[] = "!";

absl::Status Error(const std::string& where, int line, const std::string& message) {
  if (line > 0) return absl::InvalidArgumentError(absl::StrCat(where, ":", line, ": ", message));
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", message));
}

int LineOf(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : 0;
}

std::string KeyList(const char* const* begin, const char* const* end) { return absl::StrJoin(begin, end, ", "); }

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot read matrix file: ", fs::exists(path, ec) ? "not a file" : "no such file"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof())
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read matrix file: read error"));
  return text.str();
}

std::string ShortestFloat(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string ShortestFloat(float value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// One value of `field` (index -1: a singular field) as a YAML node.
YAML::Node FieldValueToYaml(const Message& message, const FieldDescriptor* field, int index);

// The fields set in `message` as a YAML map, in field-number order.
YAML::Node MessageToYaml(const Message& message) {
  YAML::Node map(YAML::NodeType::Map);
  const Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->is_repeated()) {
      YAML::Node seq(YAML::NodeType::Sequence);
      for (int i = 0; i < reflection->FieldSize(message, field); ++i)
        seq.push_back(FieldValueToYaml(message, field, i));
      map[field->name()] = seq;
    } else {
      map[field->name()] = FieldValueToYaml(message, field, -1);
    }
  }
  return map;
}

YAML::Node FieldValueToYaml(const Message& message, const FieldDescriptor* field, int index) {
  const Reflection* r = message.GetReflection();
  const bool rep = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return YAML::Node(absl::StrCat(rep ? r->GetRepeatedInt32(message, field, index) : r->GetInt32(message, field)));
    case FieldDescriptor::CPPTYPE_INT64:
      return YAML::Node(absl::StrCat(rep ? r->GetRepeatedInt64(message, field, index) : r->GetInt64(message, field)));
    case FieldDescriptor::CPPTYPE_UINT32:
      return YAML::Node(absl::StrCat(rep ? r->GetRepeatedUInt32(message, field, index) : r->GetUInt32(message, field)));
    case FieldDescriptor::CPPTYPE_UINT64:
      return YAML::Node(absl::StrCat(rep ? r->GetRepeatedUInt64(message, field, index) : r->GetUInt64(message, field)));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return YAML::Node(
          ShortestFloat(rep ? r->GetRepeatedDouble(message, field, index) : r->GetDouble(message, field)));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return YAML::Node(ShortestFloat(rep ? r->GetRepeatedFloat(message, field, index) : r->GetFloat(message, field)));
    case FieldDescriptor::CPPTYPE_BOOL:
      return YAML::Node(std::string(
          (rep ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field)) ? "true" : "false"));
    case FieldDescriptor::CPPTYPE_ENUM:
      return YAML::Node((rep ? r->GetRepeatedEnum(message, field, index) : r->GetEnum(message, field))->name());
    case FieldDescriptor::CPPTYPE_STRING:
      // Plain where YAML allows; the emitter quotes "", "null", "a: b" etc.
      return YAML::Node(rep ? r->GetRepeatedString(message, field, index) : r->GetString(message, field));
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageToYaml(rep ? r->GetRepeatedMessage(message, field, index) : r->GetMessage(message, field));
  }
  return YAML::Node();
}

void Emit(YAML::Emitter& out, const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      out << YAML::Block << YAML::BeginMap;
      for (const auto& entry : node) {
        out << YAML::Key << entry.first.Scalar() << YAML::Value;
        Emit(out, entry.second);
      }
      out << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      out << YAML::Flow << YAML::BeginSeq;
      for (const auto& element : node) Emit(out, element);
      out << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar:
      if (node.Tag() == kQuotedTag) {
        out << YAML::DoubleQuoted << node.Scalar();
      } else {
        out << node.Scalar();
      }
      break;
    default:
      out << YAML::Null;
      break;
  }
}

std::string EmitYaml(const YAML::Node& node) {
  YAML::Emitter out;
  Emit(out, node);
  std::string text = out.c_str();
  if (!text.empty() && text.back() != '\n') text += '\n';
  return text;
}

// `patch` merged into a copy of `base`: maps merge key by key, anything else
// replaces.
YAML::Node Merge(const YAML::Node& base, const YAML::Node& patch) {
  if (!base.IsMap() || !patch.IsMap()) return YAML::Clone(patch);
  YAML::Node merged = YAML::Clone(base);
  for (const auto& entry : patch) {
    const std::string key = entry.first.Scalar();
    const YAML::Node& existing = static_cast<const YAML::Node&>(merged)[key];
    if (existing.IsDefined()) {
      merged[key] = Merge(existing, entry.second);
    } else {
      merged[key] = YAML::Clone(entry.second);
    }
  }
  return merged;
}

// Parses `node` alone as (part of) an ExperimentConfig, to find unknown fields
// and wrong types where the user wrote them. The returned message has the
// config library's "<file>:<line>: " prefix removed: its line would count in
// the re-emitted snippet, not in the matrix file.
absl::Status CheckSnippet(const YAML::Node& node) {
  constexpr char kMarker[] = "<pstrain-compare-snippet>";
  absl::StatusOr<ExperimentConfig> parsed = ParseExperimentYaml(EmitYaml(node), kMarker);
  if (parsed.ok()) return absl::OkStatus();
  std::string message(parsed.status().message());
  if (absl::StartsWith(message, kMarker)) {
    size_t pos = sizeof(kMarker) - 1;
    if (pos < message.size() && message[pos] == ':') {
      ++pos;
      while (pos < message.size() && absl::ascii_isdigit(message[pos])) ++pos;
      if (pos < message.size() && message[pos] == ':') ++pos;
      while (pos < message.size() && message[pos] == ' ') ++pos;
      message = message.substr(pos);
    }
  }
  return absl::InvalidArgumentError(message);
}

absl::StatusOr<std::string> ScalarOf(const YAML::Node& node, const std::string& where, const std::string& what) {
  if (!node.IsScalar()) return Error(where, LineOf(node), absl::StrCat(what, ": expected a string"));
  return node.Scalar();
}

absl::StatusOr<int> CountOf(const YAML::Node& node, const std::string& where, const std::string& what, int minimum) {
  const std::string text = node.IsScalar() ? node.Scalar() : std::string("(not a scalar)");
  int value = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!node.IsScalar() || result.ec != std::errc() || result.ptr != text.data() + text.size() || value < minimum ||
      value > kMaxShorthandCount) {
    return Error(
        where, LineOf(node),
        absl::StrCat(what, ": expected an integer in [", minimum, ", ", kMaxShorthandCount, "], got '", text, "'"));
  }
  return value;
}

YAML::Node HostList(int count, int first_port) {
  YAML::Node seq(YAML::NodeType::Sequence);
  for (int i = 0; i < count; ++i) seq.push_back(absl::StrCat("localhost:", first_port + i));
  return seq;
}

// yaml-cpp throws when a missing key's node is asked its type, so every
// lookup that may miss checks IsDefined() first.
bool HasPath(const YAML::Node& node, const char* section, const char* key) {
  if (!node.IsDefined() || !node.IsMap()) return false;
  const YAML::Node sub = node[section];
  return sub.IsDefined() && sub.IsMap() && sub[key].IsDefined();
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

}  // namespace

std::string Slug(std::string_view label) {
  std::string slug;
  bool pending_dash = false;
  for (const char c : label) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      if (pending_dash && !slug.empty()) slug += '-';
      pending_dash = false;
      slug += absl::ascii_tolower(static_cast<unsigned char>(c));
    } else {
      pending_dash = true;
    }
    if (slug.size() >= 40) break;
  }
  if (slug.size() > 40) slug.resize(40);
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return slug.empty() ? "variant" : slug;
}

absl::StatusOr<std::string> MergeYamlText(std::string_view base, std::string_view patch) {
  try {
    return EmitYaml(Merge(YAML::Load(std::string(base)), YAML::Load(std::string(patch))));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid YAML: ", e.what()));
  }
}

absl::StatusOr<Matrix> LoadMatrix(const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, ReadText(path));
  return ParseMatrix(text, path);
}

absl::StatusOr<Matrix> ParseMatrix(std::string_view text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Error(path, e.mark.line >= 0 ? e.mark.line + 1 : 0, absl::StrCat("invalid YAML: ", e.msg));
  }
  const std::string matrix_keys = KeyList(std::begin(kMatrixKeys), std::end(kMatrixKeys));
  if (!root.IsMap()) {
    return Error(path, 0, absl::StrCat("expected a map with the keys ", matrix_keys, " (see docs/COMPARE.md)"));
  }
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    if (std::find(std::begin(kMatrixKeys), std::end(kMatrixKeys), key) == std::end(kMatrixKeys)) {
      return Error(path, LineOf(entry.first),
                   absl::StrCat("unknown key '", key, "'; the valid keys of a matrix are: ", matrix_keys));
    }
  }

  Matrix matrix;
  matrix.path = path;
  matrix.name = fs::path(path).stem().string();
  if (const YAML::Node name = root["name"]; name.IsDefined() && !name.IsNull()) {
    PSTRAIN_ASSIGN_OR_RETURN(matrix.name, ScalarOf(name, path, "name"));
    if (matrix.name.empty()) return Error(path, LineOf(name), "name: expected a non-empty string");
  }
  if (const YAML::Node description = root["description"]; description.IsDefined() && !description.IsNull()) {
    PSTRAIN_ASSIGN_OR_RETURN(matrix.description, ScalarOf(description, path, "description"));
  }

  // The base config, parsed by the config library (either format), then
  // turned back into YAML so variants merge into it.
  const YAML::Node base = root["base"];
  if (!base.IsDefined() || base.IsNull()) {
    return Error(path, 0,
                 "missing key 'base': the experiment config every variant starts from (a path "
                 "relative to the matrix file)");
  }
  PSTRAIN_ASSIGN_OR_RETURN(const std::string base_text, ScalarOf(base, path, "base"));
  fs::path base_path(base_text);
  if (base_path.is_relative()) base_path = fs::path(path).parent_path() / base_path;
  matrix.base_path = base_path.lexically_normal().string();
  absl::StatusOr<ExperimentConfig> base_config = ReadExperimentConfig(matrix.base_path);
  if (!base_config.ok()) {
    return Error(path, LineOf(base), absl::StrCat("base: ", base_config.status().message()));
  }
  const YAML::Node base_yaml = MessageToYaml(*base_config);

  YAML::Node overrides;  // Null unless the matrix has overrides.
  if (const YAML::Node node = root["overrides"]; node.IsDefined() && !node.IsNull()) {
    if (!node.IsMap()) {
      return Error(path, LineOf(node), "overrides: expected a map of config fields");
    }
    if (absl::Status status = CheckSnippet(node); !status.ok()) {
      return Error(path, LineOf(node), absl::StrCat("overrides: ", status.message()));
    }
    overrides = node;
  }

  const YAML::Node variants = root["variants"];
  if (!variants.IsDefined() || !variants.IsSequence() || variants.size() == 0) {
    return Error(path, variants.IsDefined() ? LineOf(variants) : 0,
                 "variants: expected a non-empty list of variants, each a map with the keys "
                 "label, set, workers, ps");
  }
  const std::string variant_keys = KeyList(std::begin(kVariantKeys), std::end(kVariantKeys));
  const int width = std::max<int>(2, absl::StrCat(variants.size()).size());
  std::set<std::string> labels;
  for (size_t i = 0; i < variants.size(); ++i) {
    const YAML::Node node = variants[i];
    const std::string number = absl::StrCat("variant #", i + 1);
    if (!node.IsMap()) {
      return Error(path, LineOf(node), absl::StrCat(number, ": expected a map with the keys ", variant_keys));
    }
    const YAML::Node label_node = node["label"];
    if (!label_node.IsDefined() || !label_node.IsScalar() || label_node.Scalar().empty()) {
      return Error(path, LineOf(node),
                   absl::StrCat(number,
                                ": expected a non-empty 'label' (the variant's name in "
                                "the table and the chart)"));
    }
    Variant variant;
    variant.label = label_node.Scalar();
    variant.index = static_cast<int>(i);
    variant.line = LineOf(node);
    const std::string who = absl::StrCat("variant '", variant.label, "'");
    if (!labels.insert(variant.label).second) {
      return Error(path, variant.line, absl::StrCat(who, ": the label is used twice; labels must be unique"));
    }
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      if (std::find(std::begin(kVariantKeys), std::end(kVariantKeys), key) == std::end(kVariantKeys)) {
        return Error(path, LineOf(entry.first),
                     absl::StrCat(who, ": unknown key '", key, "'; the valid keys of a variant are: ", variant_keys));
      }
    }
    std::string slug = Slug(variant.label);
    variant.dir_name = absl::StrFormat("%0*d-%s", width, i + 1, slug);

    // base <- name <- overrides <- set <- shorthands.
    YAML::Node merged = YAML::Clone(base_yaml);
    merged["name"] = absl::StrCat(matrix.name, "-", slug);
    if (overrides.IsMap()) merged = Merge(merged, overrides);
    const YAML::Node set = node["set"];
    if (set.IsDefined() && !set.IsNull()) {
      if (!set.IsMap()) {
        return Error(path, LineOf(set), absl::StrCat(who, ": set: expected a map of config fields"));
      }
      if (absl::Status status = CheckSnippet(set); !status.ok()) {
        return Error(path, LineOf(set), absl::StrCat(who, ": set: ", status.message()));
      }
      merged = Merge(merged, set);
    }
    struct Shorthand {
      const char* key;
      const char* hosts_field;
      int first_port;
    };
    for (const Shorthand& shorthand :
         {Shorthand{"ps", "ps_hosts", kPsShorthandPort}, Shorthand{"workers", "worker_hosts", kWorkerShorthandPort}}) {
      const YAML::Node count_node = node[shorthand.key];
      if (!count_node.IsDefined()) continue;
      PSTRAIN_ASSIGN_OR_RETURN(const int count,
                               CountOf(count_node, path, absl::StrCat(who, ": ", shorthand.key),
                                       /*minimum=*/shorthand.hosts_field == std::string("ps_hosts") ? 0 : 1));
      if (HasPath(set, "cluster", shorthand.hosts_field)) {
        return Error(path, LineOf(count_node),
                     absl::StrCat(who, ": give either '", shorthand.key,
                                  ": N' or 'set: cluster: ", shorthand.hosts_field, "', not both"));
      }
      const YAML::Node cluster = static_cast<const YAML::Node&>(merged)["cluster"];
      if (!cluster.IsDefined() || !cluster.IsMap()) merged["cluster"] = YAML::Node(YAML::NodeType::Map);
      merged["cluster"][shorthand.hosts_field] = HostList(count, shorthand.first_port);
    }
    variant.yaml = EmitYaml(merged);
    matrix.variants.push_back(std::move(variant));
  }

  if (const YAML::Node baseline = root["baseline"]; baseline.IsDefined() && !baseline.IsNull()) {
    PSTRAIN_ASSIGN_OR_RETURN(const std::string label, ScalarOf(baseline, path, "baseline"));
    bool found = false;
    for (const Variant& variant : matrix.variants) {
      if (variant.label == label) {
        matrix.baseline = variant.index;
        found = true;
      }
    }
    if (!found) {
      std::vector<std::string> quoted;
      for (const Variant& variant : matrix.variants) quoted.push_back(absl::StrCat("'", variant.label, "'"));
      return Error(path, LineOf(baseline),
                   absl::StrCat("baseline: '", label,
                                "' is not a variant label; the labels are: ", absl::StrJoin(quoted, ", ")));
    }
  }
  return matrix;
}

absl::Status PrepareVariants(Matrix& matrix, const std::string& out_dir) {
  // Write every config first, so a user can look at all of them even when one
  // is rejected.
  std::vector<std::string> texts;
  for (Variant& variant : matrix.variants) {
    const fs::path dir = fs::path(out_dir) / variant.dir_name;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(dir.string(), ": cannot create directory: ", ec.message()));
    }
    variant.config_path = (dir / "config.yaml").string();
    std::string text = absl::StrCat("# Generated by pstrain-compare: variant '", variant.label, "' of ", matrix.path,
                                    "\n# base: ", matrix.base_path, "\n", variant.yaml);
    PSTRAIN_RETURN_IF_ERROR(WriteText(variant.config_path, text));
    texts.push_back(std::move(text));
  }
  for (size_t i = 0; i < matrix.variants.size(); ++i) {
    Variant& variant = matrix.variants[i];
    const std::string who = absl::StrCat(matrix.path, ": variant '", variant.label, "' (#", i + 1,
                                         variant.line > 0 ? absl::StrCat(", line ", variant.line) : "", "): ");
    absl::StatusOr<ExperimentConfig> config = ParseExperimentYaml(texts[i], variant.config_path);
    if (!config.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(who, config.status().message()));
    }
    if (absl::Status status = ValidateExperimentConfig(*config, variant.config_path); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(who, status.message()));
    }
    variant.config = *std::move(config);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::compare
