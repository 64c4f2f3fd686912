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

constexpr Fp32Math kFp32Maths[] = {Fp32Math::kStrict, Fp32Math::kTf32Convolutions, Fp32Math::kTf32};

std::vector<std::string> Fp32MathNames() {
  std::vector<std::string> names;
  for (Fp32Math m : kFp32Maths) names.push_back(Fp32MathName(m));
  return names;
}

std::string Fp32MathName(Fp32Math math) {
  switch (math) {
    case Fp32Math::kStrict:
      return "strict";
    case Fp32Math::kTf32Convolutions:
      return "tf32_convolutions";
    case Fp32Math::kTf32:
      return "tf32";
  }
  return "?";
}

absl::StatusOr<Fp32Math> ParseFp32Math(absl::string_view name) {
  for (Fp32Math m : kFp32Maths) {
    if (name == Fp32MathName(m)) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown fp32_math '", name, "': expected one of ", absl::StrJoin(Fp32MathNames(), ", ")));
}

std::string DescribeArithmetic(Precision precision, Fp32Math math) {
  if (precision != Precision::kFp32) return absl::StrCat(PrecisionName(precision), " (mixed precision)");
  switch (math) {
    case Fp32Math::kStrict:
      return "fp32 (strict)";
    case Fp32Math::kTf32Convolutions:
      return "fp32 (convolutions in TF32, matmuls strict)";
    case Fp32Math::kTf32:
      return "fp32 (convolutions and matmuls in TF32)";
  }
  return "fp32";
}

}  // namespace pstrain
