// Fuzz target: the experiment config loader and its validation
// (common/config/config_loader.h, yaml_to_proto.h), as a role checks a
// config: this binary links the PS and the worker, so every module's config
// check is registered (models, optimizers, data sources, transports,
// consistency policies, strategies).
//
// Feeds: input byte 0 picks the format (even: YAML, odd: protobuf text);
// the rest is the file's text, parsed by ParseExperimentYaml /
// ParseExperimentTextProto and, when it parses, checked by
// ValidateExperimentConfig.
// Asserts: every error is INVALID_ARGUMENT and names the file ("fuzz.yaml"
// or "fuzz.pbtxt"); a config that parses survives the YAML round trip
// yaml_to_proto.h promises (MessageToYaml, then ParseYamlIntoMessage, gives
// an equal message) and validates the same way after it.
// Seeds: tests/fuzz/corpus/config/ (every shipped configs/**/*.yaml with a
// 0 byte in front, one text-proto rendering; crash-* regression inputs).
#include <string>
#include <string_view>

#include "common/config/config_loader.h"
#include "common/config/yaml_to_proto.h"
#include "google/protobuf/util/message_differencer.h"
#include "proto/config.pb.h"
#include "tests/fuzz/fuzz_util.h"

using namespace pstrain;  // NOLINT

namespace {

void CheckError(const absl::Status& status, const std::string& file, const char* what) {
  if (status.ok()) return;
  FUZZ_CHECK(absl::IsInvalidArgument(status), what, ": ", status.ToString(), " is not INVALID_ARGUMENT");
  FUZZ_CHECK(status.message().find(file) != absl::string_view::npos, what, ": error does not name ", file, ": ",
             status.ToString());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool yaml = data[0] % 2 == 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string file = yaml ? "fuzz.yaml" : "fuzz.pbtxt";
  absl::StatusOr<ExperimentConfig> parsed =
      yaml ? ParseExperimentYaml(text, file) : ParseExperimentTextProto(text, file);
  if (!parsed.ok()) {
    CheckError(parsed.status(), file, "parse");
    return 0;
  }
  const absl::Status valid = ValidateExperimentConfig(*parsed, file);
  CheckError(valid, file, "validate");

  const std::string written = MessageToYaml(*parsed);
  ExperimentConfig again;
  const absl::Status reread = ParseYamlIntoMessage(written, "written.yaml", &again);
  FUZZ_CHECK(reread.ok(), "MessageToYaml wrote what ParseYamlIntoMessage refuses: ", reread.ToString(), "\n", written);
  google::protobuf::util::MessageDifferencer same;
  google::protobuf::util::DefaultFieldComparator floats;
  floats.set_treat_nan_as_equal(true);
  same.set_field_comparator(&floats);
  std::string differences;
  same.ReportDifferencesToString(&differences);
  FUZZ_CHECK(same.Compare(*parsed, again), "YAML round trip changed the config: ", differences, "\n", written);
  const absl::Status valid_again = ValidateExperimentConfig(again, file);
  FUZZ_CHECK(valid_again.ok() == valid.ok(), "validation differs after the round trip: ", valid.ToString(), " vs ",
             valid_again.ToString());
  return 0;
}
