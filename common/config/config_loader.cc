#include "common/config/config_loader.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/yaml_to_proto.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace pstrain {
namespace {

enum class Format { kYaml, kTextProto };

absl::StatusOr<Format> FormatOf(const std::string& path) {
  const std::string ext = absl::AsciiStrToLower(std::filesystem::path(path).extension().string());
  if (ext == ".yaml" || ext == ".yml") return Format::kYaml;
  if (ext == ".pbtxt" || ext == ".textproto" || ext == ".prototxt") return Format::kTextProto;
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": cannot tell the config format from the extension '", ext,
                   "': expected .yaml or .yml (YAML) or .pbtxt, .textproto or .prototxt (protobuf text)"));
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    const bool other = ec && ec != std::errc::no_such_file_or_directory;
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot read config file: ", other ? ec.message() : std::string("no such file")));
  }
  if (std::filesystem::is_directory(status)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read config file: it is a directory"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read config file: permission denied or unreadable"));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read config file: read error"));
  }
  return buf.str();
}

// Collects the first text-format error as "<file>:<line>:<col>: <message>",
// adding the valid field names when the error is an unknown field.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  explicit FirstErrorCollector(std::string_view filename) : filename_(filename) {}

  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (!error_.empty()) return;
    error_ = absl::StrCat(filename_, ":", line + 1, ":", column + 1, ": ", message, ValidKeysHint(message));
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}

  const std::string& error() const { return error_; }

 private:
  // For 'Message type "pstrain.TrainConfig" has no field named "x".'
  static std::string ValidKeysHint(const std::string& message) {
    constexpr absl::string_view kPrefix = "Message type \"";
    if (!absl::StartsWith(message, kPrefix) || !absl::StrContains(message, "has no field named")) {
      return "";
    }
    const size_t end = message.find('"', kPrefix.size());
    if (end == std::string::npos) return "";
    const std::string type = message.substr(kPrefix.size(), end - kPrefix.size());
    const google::protobuf::Descriptor* desc =
        google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
    if (desc == nullptr) return "";
    std::vector<std::string> keys;
    for (int i = 0; i < desc->field_count(); ++i) keys.push_back(desc->field(i)->name());
    return absl::StrCat(" The valid keys of ", desc->name(), " are: ", absl::StrJoin(keys, ", "));
  }

  std::string filename_;
  std::string error_;
};

absl::Status ParseTextProtoInto(std::string_view text, std::string_view filename, google::protobuf::Message* message) {
  FirstErrorCollector errors(filename);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), message)) {
    return absl::InvalidArgumentError(errors.error().empty()
                                          ? absl::StrCat(std::string(filename), ": invalid protobuf text format")
                                          : errors.error());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExperimentConfig> ParseExperimentYaml(std::string_view yaml, std::string_view filename) {
  ExperimentConfig config;
  PSTRAIN_RETURN_IF_ERROR(ParseYamlIntoMessage(yaml, filename, &config));
  return config;
}

absl::StatusOr<ExperimentConfig> ParseExperimentTextProto(std::string_view text, std::string_view filename) {
  ExperimentConfig config;
  PSTRAIN_RETURN_IF_ERROR(ParseTextProtoInto(text, filename, &config));
  return config;
}

absl::Status ReadConfigMessage(const std::string& path, google::protobuf::Message* message) {
  PSTRAIN_ASSIGN_OR_RETURN(const Format format, FormatOf(path));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  message->Clear();
  return format == Format::kYaml ? ParseYamlIntoMessage(text, path, message) : ParseTextProtoInto(text, path, message);
}

absl::StatusOr<ExperimentConfig> ReadExperimentConfig(const std::string& path) {
  ExperimentConfig config;
  PSTRAIN_RETURN_IF_ERROR(ReadConfigMessage(path, &config));
  if (!config.has_name()) config.set_name(std::filesystem::path(path).stem().string());
  return config;
}

absl::StatusOr<ExperimentConfig> LoadExperimentConfig(const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(ExperimentConfig config, ReadExperimentConfig(path));
  PSTRAIN_RETURN_IF_ERROR(ValidateExperimentConfig(config, path));
  return config;
}

}  // namespace pstrain
