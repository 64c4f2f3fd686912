// result.json: the one record of a run that every comparison tool reads
// (see "Output contract" in docs/ARCHITECTURE.md). Nothing parses log text.
//
// The record is the RunResult message of proto/results.proto (with the PS
// shards' ShardLoad of proto/ps.proto); reading and writing follow its
// descriptor, so a field added to the proto reaches result.json by itself.
//
// Format: a JSON object, one field per line in the proto's field order, the
// contract fields (1-20) first, then "ps_load" (one object per PS shard per
// line). Numbers are JSON numbers (int64 too). JSON has no NaN or infinity:
// a double that is not finite is written as null and read back as NaN; an
// optional field that is absent (test_accuracy when the run did not
// evaluate) is written as null and read back as absent. Readers ignore
// unknown fields, so fields can be added without breaking old tools; a
// missing contract field is an error, later fields may be absent.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/results.pb.h"

namespace pstrain {

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

// Output-contract fields are numbered 1..kLastContractField.
inline constexpr int kLastContractField = 20;

}  // namespace pstrain
