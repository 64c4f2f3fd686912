// Precision: the arithmetic of the compute-bound layers (convolutions,
// dense): fp32 throughout, or mixed precision: their inputs, weights and
// incoming gradients rounded to bf16 (fp16) for the product, accumulated and
// written in fp32. Everything else stays fp32: activations between layers,
// the variables (master weights), their gradients, optimizer state. Which
// device kind computes in which is its registry entry's say
// (DeviceEntry::supports, device/device_registry.h).
//
// Fp32Math: how float32 products are computed where a device has a choice:
// GPUs of compute capability 8.0+ can run them on TF32 tensor cores (inputs
// rounded to a 10-bit mantissa, float32 accumulation), several times faster
// than plain float32 and PyTorch's default for convolutions. Everywhere else
// (CPUs, older GPUs) float32 products are strict whatever is asked
// (DeviceContext::fp32_math says what runs).
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

enum class Fp32Math {
  kStrict,            // plain float32: results match the CPU to float rounding
  kTf32Convolutions,  // convolutions in TF32, matmuls strict (PyTorch's defaults)
  kTf32,              // convolutions and matmuls in TF32
};
// The names configs give them (`fp32_math:`): "strict", "tf32_convolutions", "tf32".
std::vector<std::string> Fp32MathNames();
std::string Fp32MathName(Fp32Math math);
// InvalidArgument listing Fp32MathNames() for any other name.
absl::StatusOr<Fp32Math> ParseFp32Math(absl::string_view name);
// Whether convolutions (matmuls: dense layers) may run in TF32 under `math`.
inline bool Tf32Convolutions(Fp32Math math) { return math != Fp32Math::kStrict; }
inline bool Tf32Matmuls(Fp32Math math) { return math == Fp32Math::kTf32; }
// For run headers: "fp32 (strict)", "fp32 (convolutions in TF32, matmuls
// strict)", "fp32 (convolutions and matmuls in TF32)", or "bf16 (mixed
// precision)" (16-bit products; `math` has no float32 products to govern).
std::string DescribeArithmetic(Precision precision, Fp32Math math);

}  // namespace pstrain
