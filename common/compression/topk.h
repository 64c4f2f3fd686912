// Top-k sparsification with error feedback (Deep Gradient Compression, Lin
// et al. 2018; Stich et al. 2018): of each gradient only the k elements
// largest in magnitude travel, as (index, value) pairs; what was not sent is
// kept in a residual and added to the next gradient of the same tensor, so
// every bit of gradient is applied eventually and training converges close to
// the uncompressed run. One encoder per tensor and sender (a worker's push of
// one variable part); not thread-safe (one push of a tensor at a time).
#pragma once

#include <cstdint>
#include <vector>

namespace pstrain {

class TopKEncoder {
 public:
  // A tensor of n > 0 elements; k = clamp(ceil(ratio * n), 1, n), 0 < ratio <= 1.
  TopKEncoder(int64_t n, double ratio);

  int64_t n() const { return static_cast<int64_t>(residual_.size()); }
  int64_t k() const { return k_; }
  // Bytes one encoded tensor takes on the wire: k uint32 indices, k floats.
  int64_t wire_bytes() const { return k_ * 8; }

  // accumulated = gradient + residual; writes the k entries of accumulated
  // largest in magnitude (indices ascending; ties broken by lower index) to
  // indices[0..k) and values[0..k); the residual becomes accumulated with
  // those entries zeroed.
  void Encode(const float* gradient, uint32_t* indices, float* values);

  const std::vector<float>& residual() const { return residual_; }

 private:
  int64_t k_;
  std::vector<float> residual_;
  std::vector<uint32_t> order_;  // scratch: element indices
};

}  // namespace pstrain
