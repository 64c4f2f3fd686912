// Precision: the arithmetic of the compute-bound layers (convolutions,
// dense): fp32 throughout, or mixed precision: their inputs, weights and
// incoming gradients rounded to bf16 (fp16) for the product, accumulated and
// written in fp32. Everything else stays fp32: activations between layers,
// the variables (master weights), their gradients, optimizer state. Which
// device kind computes in which is its registry entry's say
// (DeviceEntry::supports, device/device_registry.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

enum class Precision { kFp32, kBf16, kFp16 };
// The names configs give them (`precision:`): "fp32", "bf16", "fp16".
std::vector<std::string> PrecisionNames();
std::string PrecisionName(Precision precision);
// InvalidArgument listing PrecisionNames() for any other name.
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);

}  // namespace pstrain
