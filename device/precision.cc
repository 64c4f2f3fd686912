#include "device/precision.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {

constexpr Precision kPrecisions[] = {Precision::kFp32, Precision::kBf16, Precision::kFp16};

std::vector<std::string> PrecisionNames() {
  std::vector<std::string> names;
  for (Precision p : kPrecisions) names.push_back(PrecisionName(p));
  return names;
}

std::string PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  for (Precision p : kPrecisions) {
    if (name == PrecisionName(p)) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown precision '", name, "': expected one of ", absl::StrJoin(PrecisionNames(), ", ")));
}

}  // namespace pstrain
