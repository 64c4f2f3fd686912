#include "worker/bag_pooling.h"

#include <algorithm>

namespace pstrain {

int BagLength(const int32_t* slots, int bag) {
  return static_cast<int>(std::count_if(slots, slots + bag, [](int32_t k) { return k >= 0; }));
}

void PoolBag(const int32_t* slots, int bag, bool mean, const float* rows, int dim, float* out) {
  std::fill_n(out, dim, 0.0f);
  for (int j = 0; j < bag; ++j) {
    if (slots[j] < 0) continue;
    const float* row = rows + static_cast<int64_t>(slots[j]) * dim;
    for (int d = 0; d < dim; ++d) out[d] += row[d];
  }
  const int length = BagLength(slots, bag);
  if (mean && length > 1) {
    for (int d = 0; d < dim; ++d) out[d] /= static_cast<float>(length);
  }
}

void AddBagGradient(const int32_t* slots, int bag, bool mean, const float* grad, float scale, int dim,
                    float* row_grads) {
  const int length = BagLength(slots, bag);
  if (mean && length > 1) scale /= static_cast<float>(length);
  for (int j = 0; j < bag; ++j) {
    if (slots[j] < 0) continue;
    float* row = row_grads + static_cast<int64_t>(slots[j]) * dim;
    for (int d = 0; d < dim; ++d) row[d] += grad[d] * scale;
  }
}

}  // namespace pstrain
