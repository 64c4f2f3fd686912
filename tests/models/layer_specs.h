// LayerSpec builders shared by the layer tests (layer_gradient_test.cc,
// cuda_cpu_agreement_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/layers/layer.h"

namespace pstrain::testing {

// A conv2d with every attribute spelled out.
inline LayerSpec Conv(int64_t filters, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                      std::vector<int64_t> padding, int64_t groups = 1, int64_t bias = 1) {
  return LayerSpec{"conv2d"}
      .Int("filters", filters)
      .Ints("kernel", std::move(kernel))
      .Ints("stride", std::move(stride))
      .Ints("padding", std::move(padding))
      .Int("groups", groups)
      .Int("bias", bias);
}

// A pooling layer of `type` (max_pool, avg_pool) with a square k x k window,
// stride s and padding p on both axes.
inline LayerSpec Pool(const std::string& type, int64_t k, int64_t s, int64_t p) {
  return LayerSpec{type}.Ints("kernel", {k, k}).Ints("stride", {s, s}).Ints("padding", {p, p});
}

}  // namespace pstrain::testing
