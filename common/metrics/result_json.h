// result.json: the one record of a run that every comparison tool reads
// (see "Output contract" in docs/ARCHITECTURE.md). Nothing parses log text.
//
// Format: a JSON object, one field per line, the contract fields first in the
// order of RunResult below, then "ps_load" (one object per PS shard per line).
// JSON has no NaN or infinity: a non-finite double is written as null and
// read back as NaN (test_accuracy: written as null, read back as absent).
// Readers ignore unknown fields, so fields can be added without breaking old
// tools; a missing contract field is an error. "ps_load" may be absent (read
// as empty).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain {

// What one PS shard did during the run.
struct ShardLoadSummary {
  int shard = 0;
  int64_t variables = 0;       // Variables (or partitions) stored on the shard.
  int64_t variable_bytes = 0;  // Their total size.
  int64_t bytes_in = 0;        // Payload bytes received (pushes).
  int64_t bytes_out = 0;       // Payload bytes sent (pulls).
  int64_t applied_updates = 0;
  int64_t dropped_gradients = 0;  // Stale or surplus gradients discarded.
  double apply_seconds = 0;       // Time spent applying updates.

  bool operator==(const ShardLoadSummary&) const = default;
};

struct RunResult {
  std::string experiment;
  std::string model;
  std::string variable_update;
  std::string local_parameter_device;
  std::string all_reduce_spec;
  std::string consistency;
  int staleness = 0;
  std::string transport;
  int num_ps = 0;
  int num_workers = 0;
  int devices_per_worker = 0;
  std::string device;
  int64_t batch_size_per_device = 0;
  int64_t global_batch_size = 0;
  int64_t steps = 0;
  double images_per_sec = 0;
  double images_per_sec_stddev = 0;
  double final_loss = 0;
  std::optional<double> test_accuracy;  // Absent (null) when not evaluated.
  double wall_seconds = 0;
  std::vector<ShardLoadSummary> ps_load;
};

// The JSON text of `result`, ending in a newline.
std::string ToJson(const RunResult& result);

// Writes ToJson(result) to `path` atomically: to "<path>.tmp", flushed to
// disk, then renamed over `path`, so readers see the old file or the whole new
// one. Errors name the file.
absl::Status WriteResultJson(const RunResult& result, const std::string& path);

// Reads a file written by WriteResultJson. NOT_FOUND when missing;
// INVALID_ARGUMENT naming the file (and field) when it is not valid JSON or a
// contract field is missing or of the wrong type.
absl::StatusOr<RunResult> ReadResultJson(const std::string& path);

// The parsing half of ReadResultJson; `origin` names the source in errors.
absl::StatusOr<RunResult> ParseResultJson(const std::string& json, const std::string& origin);

}  // namespace pstrain
