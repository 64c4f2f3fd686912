#include "common/compression/topk.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/compression/compression.h"
#include "glog/logging.h"

namespace pstrain {

TopKEncoder::TopKEncoder(int64_t n, double ratio) : residual_(static_cast<size_t>(n), 0.0f), order_(n) {
  CHECK_GT(n, 0);
  CHECK(ratio > 0 && ratio <= 1) << "top-k ratio " << ratio;
  CHECK_LE(n, int64_t{1} << 32) << "top-k indices are 32-bit";
  k_ = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(ratio * static_cast<double>(n))), 1, n);
}

void TopKEncoder::Encode(const float* gradient, uint32_t* indices, float* values) {
  const size_t n = residual_.size();
  for (size_t i = 0; i < n; ++i) residual_[i] += gradient[i];
  std::iota(order_.begin(), order_.end(), 0u);
  // Larger magnitude first; the lower index wins a tie, so the choice is
  // deterministic.
  auto larger = [this](uint32_t a, uint32_t b) {
    const float ma = std::fabs(residual_[a]), mb = std::fabs(residual_[b]);
    return ma > mb || (ma == mb && a < b);
  };
  if (k_ < static_cast<int64_t>(n)) std::nth_element(order_.begin(), order_.begin() + k_, order_.end(), larger);
  std::sort(order_.begin(), order_.begin() + k_);
  for (int64_t j = 0; j < k_; ++j) {
    const uint32_t i = order_[j];
    indices[j] = i;
    values[j] = residual_[i];
    residual_[i] = 0.0f;
  }
}

namespace {

const bool kRegistered = CompressionRegistry().Register(
    "topk", {Compression::kTopK, "the topk_ratio largest gradient elements, with error feedback"});

}  // namespace
}  // namespace pstrain
