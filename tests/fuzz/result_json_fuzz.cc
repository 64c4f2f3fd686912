// Fuzz target: result.json (common/metrics/result_json.h), the record every
// comparison tool reads back from a run directory.
//
// Feeds: the input as JSON text to ParseResultJson.
// Asserts: an error is INVALID_ARGUMENT naming the source; an accepted
// record written again (ToJson) parses again and writes the same text (the
// round trip is a fixed point, NaN included, so nothing is lost or invented).
// Seeds: tests/fuzz/corpus/result_json/ (a record of every strategy family
// written by the tests' runs: PS with its shards' load, allreduce, an
// emulated run with its layout decisions; a truncated and a mistyped one).
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/metrics/result_json.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<pstrain::RunResult> result = pstrain::ParseResultJson(json, "fuzz.json");
  if (!result.ok()) {
    pstrain::fuzz::CheckErrorExplains(result.status(), "ParseResultJson");
    FUZZ_CHECK(absl::IsInvalidArgument(result.status()), result.status().ToString());
    FUZZ_CHECK(result.status().message().find("fuzz.json") != absl::string_view::npos,
               "error does not name the file: ", result.status().ToString());
    return 0;
  }
  const std::string once = pstrain::ToJson(*result);
  absl::StatusOr<pstrain::RunResult> again = pstrain::ParseResultJson(once, "written");
  FUZZ_CHECK(again.ok(), "an accepted record written again does not parse: ", again.status().ToString(), "\n", once);
  const std::string twice = pstrain::ToJson(*again);
  FUZZ_CHECK(twice == once, "the round trip changed the record:\n", once, "\n--- became ---\n", twice);
  return 0;
}
