#include "device/cpu/cpu_context.h"

#include <utility>

#include "device/cpu/dnnl_util.h"

namespace pstrain::cpu {

struct CpuContext::Cached {
  struct Reorder {
    dnnl::memory::desc from, to;
    Prim prim;
  };
  std::vector<Reorder> reorders;  // few distinct pairs: a linear scan
  std::map<int64_t, Prim> sums;   // by float count
};

CpuContext::CpuContext() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_), cached_(new Cached) {}

CpuContext::~CpuContext() = default;

dnnl::memory CpuContext::Scratchpad(const dnnl::memory::desc& desc) {
  const size_t bytes = desc.get_size();
  if (!scratchpad_ || scratchpad_->size() < bytes) scratchpad_ = Buffer::Allocate(bytes);
  return dnnl::memory(desc, engine_, scratchpad_->data());
}

void* CpuContext::Staging(int slot, size_t bytes) {
  CHECK_GE(slot, 0);
  if (static_cast<size_t>(slot) >= staging_.size()) staging_.resize(slot + 1);
  std::shared_ptr<Buffer>& buffer = staging_[slot];
  if (!buffer || buffer->size() < bytes) buffer = Buffer::AllocateUninitialized(bytes);
  return buffer->data();
}

void CpuContext::Convert(const Tensor& src, const Tensor& dst) {
  CHECK(src.shape() == dst.shape()) << "Convert " << ShapeToString(src.shape()) << " to " << ShapeToString(dst.shape());
  const dnnl::memory::desc from = DescOf(src), to = DescOf(dst);
  const Prim* prim = nullptr;
  for (const Cached::Reorder& r : cached_->reorders) {
    if (r.from == from && r.to == to) prim = &r.prim;
  }
  if (prim == nullptr) {
    cached_->reorders.push_back(
        {from, to,
         MakePrim(dnnl::reorder::primitive_desc(engine_, from, engine_, to, ScratchpadAttr()), Work::kMemory)});
    prim = &cached_->reorders.back().prim;
  }
  Run(*this, *prim, {{DNNL_ARG_FROM, View(from, *this, src)}, {DNNL_ARG_TO, View(to, *this, dst)}});
}

void CpuContext::Accumulate(const Tensor& sum, const Tensor& addend) {
  CHECK(sum.shape() == addend.shape() && SameLayout(sum.layout(), addend.layout()))
      << "Accumulate " << ShapeToString(addend.shape()) << " into " << ShapeToString(sum.shape());
  // Same layout: the buffers add as flat arrays (padding is zero in both).
  const int64_t n = static_cast<int64_t>(sum.num_bytes() / sizeof(float));
  if (n == 0) return;
  const dnnl::memory::desc flat = PlainDesc({n});
  auto it = cached_->sums.find(n);
  if (it == cached_->sums.end()) {
    dnnl::sum::primitive_desc pd(flat, {1.0f, 1.0f}, {flat, flat}, engine_, ScratchpadAttr());
    it = cached_->sums.emplace(n, MakePrim(pd, Work::kMemory)).first;
  }
  dnnl::memory s = View(flat, *this, sum);
  Run(*this, it->second,
      {{DNNL_ARG_MULTIPLE_SRC, s}, {DNNL_ARG_MULTIPLE_SRC + 1, View(flat, *this, addend)}, {DNNL_ARG_DST, s}});
}

}  // namespace pstrain::cpu
