// Loading and validating experiment configs (pstrain::ExperimentConfig).
//
// A config file is YAML (.yaml, .yml) or protobuf text format (.pbtxt,
// .textproto, .prototxt). YAML keys are exactly the field names of
// proto/config.proto; fields not given keep their schema defaults.
//
// Every error is absl::InvalidArgumentError with one message naming the file,
// the field (as a dotted path, e.g. 'train.batch_size_per_device') and what
// was expected:
//   exp.yaml:7: field 'train.batch_size_per_device': expected an integer, got 'abc'
//   exp.yaml: field 'optimizer.momentum': expected a number in [0, 1), got 1
// (parse errors carry the line; semantic errors, found after parsing, do not).
//
// Typical use:
//   - A tool that takes the whole experiment from the file:
//       PSTRAIN_ASSIGN_OR_RETURN(ExperimentConfig c, LoadExperimentConfig(path));
//   - A role binary whose cluster may come from flags or TF_CONFIG:
//       PSTRAIN_ASSIGN_OR_RETURN(ExperimentConfig c, ReadExperimentConfig(path));
//       PSTRAIN_ASSIGN_OR_RETURN(Role role, ResolveRole(kind, flags, getenv("TF_CONFIG"), &c));
//       PSTRAIN_RETURN_IF_ERROR(ValidateExperimentConfig(c, path));
// Other schemas read from files the same way (the comparison matrix,
// tools/compare) use ReadConfigMessage.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "proto/config.pb.h"

namespace pstrain {

// Reads `path` into `message` (cleared first): YAML for .yaml/.yml, protobuf
// text for .pbtxt/.textproto/.prototxt. Errors name the file (and the line
// and field for parse errors); an unknown key lists the valid ones.
absl::Status ReadConfigMessage(const std::string& path, google::protobuf::Message* message);

// Reads and parses `path` (format chosen by its extension) without the
// semantic checks. If `name` is unset it becomes the file's stem
// ("configs/exp.yaml" -> "exp"). An unreadable file is an error naming it.
absl::StatusOr<ExperimentConfig> ReadExperimentConfig(const std::string& path);

// ReadExperimentConfig followed by ValidateExperimentConfig(config, path).
absl::StatusOr<ExperimentConfig> LoadExperimentConfig(const std::string& path);

// Parses YAML text (see common/config/yaml_to_proto.h for the rules) into a
// fresh ExperimentConfig. No semantic checks, `name` left as given.
// `filename` only names the source in errors.
absl::StatusOr<ExperimentConfig> ParseExperimentYaml(std::string_view yaml, std::string_view filename);

// Parses protobuf text format into a fresh ExperimentConfig; errors carry
// <filename>:<line>:<column>. No semantic checks.
absl::StatusOr<ExperimentConfig> ParseExperimentTextProto(std::string_view text, std::string_view filename);

// Semantic checks of a parsed config: cluster hosts and value ranges here,
// then the checks the linked modules registered for the fields they own
// (config_checks.h: model names, optimizers, strategies, data files...).
// Returns the first problem found.
absl::Status ValidateExperimentConfig(const ExperimentConfig& config, std::string_view filename);

}  // namespace pstrain
