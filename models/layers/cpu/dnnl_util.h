// Small helpers shared by the oneDNN layers.
#pragma once

#include <unordered_map>
#include <utility>

#include "common/tensor.h"
#include "models/layers/cpu/cpu_context.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain::cpu {

// A dense row-major f32 descriptor for `shape` (any rank oneDNN accepts).
inline dnnl::memory::desc PlainDesc(const Shape& shape) {
  dnnl::memory::dims dims(shape.begin(), shape.end());
  dnnl::memory::dims strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

// A oneDNN memory viewing `t`'s buffer through `desc` (no copy).
inline dnnl::memory View(const dnnl::memory::desc& desc, const CpuContext& ctx, const Tensor& t) {
  CHECK_GE(t.num_bytes(), desc.get_size());
  return dnnl::memory(desc, ctx.engine(), t.raw());
}

// Runs `p` on the context's stream and waits for it.
inline void ExecuteAndWait(CpuContext& ctx, const dnnl::primitive& p,
                           const std::unordered_map<int, dnnl::memory>& args) {
  p.execute(ctx.stream(), args);
  ctx.stream().wait();
}

}  // namespace pstrain::cpu
