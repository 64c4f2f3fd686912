// The GPU roofline of `pstrain-bench model --device gpu`: cuBLAS sgemm
// (fp32, default math: no TF32, like the layers) on one GPU, timed with CUDA
// events, best of `reps` after one untimed warm-up. Same MatmulReference
// fields as the oneDNN reference (matmul_reference.h).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "tools/bench/matmul_reference.h"

namespace pstrain::bench {

// Unimplemented in a build without CUDA; FailedPrecondition without a GPU.
absl::StatusOr<MatmulReference> MeasureGpuMatmul(int ordinal, int64_t m, int64_t n, int64_t k, int reps);

}  // namespace pstrain::bench
