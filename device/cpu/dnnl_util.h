// Helpers shared by the oneDNN layers: layouts as oneDNN descriptors,
// primitives run on the context's shared scratchpad, and reorders between the
// layout a tensor has and the one a primitive wants.
//
// Layout convention: a CPU activation's TensorLayout is a DnnlLayout (the
// oneDNN memory::desc the producing primitive chose, e.g. nChw8c) unless that
// desc is plain row-major, in which case the tensor stays plain (no layout).
// So DescOf(t) is always the exact desc of t's buffer.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/tensor.h"
#include "device/cpu/cpu_context.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain::cpu {

// A oneDNN memory descriptor as a tensor layout.
class DnnlLayout final : public TensorLayout {
 public:
  explicit DnnlLayout(dnnl::memory::desc desc) : desc_(std::move(desc)) {}
  const dnnl::memory::desc& desc() const { return desc_; }
  size_t num_bytes() const override { return desc_.get_size(); }
  bool Equals(const TensorLayout& other) const override;
  // e.g. "dnnl[32,64,56,56] blocks 8@1", strides and inner blocks.
  std::string ToString() const override;

 private:
  dnnl::memory::desc desc_;
};

// A dense row-major descriptor for `shape` (any rank oneDNN accepts).
dnnl::memory::desc PlainDesc(const Shape& shape, dnnl::memory::data_type type = dnnl::memory::data_type::f32);
// format_tag::any: lets a primitive choose.
dnnl::memory::desc AnyDesc(const Shape& shape, dnnl::memory::data_type type = dnnl::memory::data_type::f32);
// What compute-bound primitives (convolution, inner product) take their
// src, weights and diff_dst as under ctx's precision: f32, or bf16 (mixed
// precision; their dst, diff_src, diff_weights and bias stay f32, and the
// conversions are reorders through Conversion).
dnnl::memory::data_type ComputeType(const CpuContext& ctx);
// The exact descriptor of t's buffer: its DnnlLayout's, else PlainDesc.
dnnl::memory::desc DescOf(const Tensor& t);
// The layout a tensor of descriptor `desc` carries: null when plain.
TensorLayoutPtr LayoutOf(const dnnl::memory::desc& desc);
// Shape of a descriptor's dims.
Shape DimsOf(const dnnl::memory::desc& desc);

// A oneDNN memory viewing `t`'s buffer through `desc` (no copy).
inline dnnl::memory View(const dnnl::memory::desc& desc, const CpuContext& ctx, const Tensor& t) {
  CHECK_GE(t.num_bytes(), desc.get_size());
  return dnnl::memory(desc, ctx.engine(), t.raw());
}
inline dnnl::memory View(const CpuContext& ctx, const Tensor& t) { return View(DescOf(t), ctx, t); }
// View() after CHECKing that t is laid out exactly as `desc` (for tensors
// whose layout the caller promised, e.g. an output allocated per
// OutputLayout()).
dnnl::memory CheckedView(const dnnl::memory::desc& desc, const CpuContext& ctx, const Tensor& t);

// Attributes for every primitive here: user-mode scratchpad.
dnnl::primitive_attr ScratchpadAttr();

// Threads. oneDNN runs each primitive as OpenMP parallel regions on all
// OMP_NUM_THREADS threads. On a CPU shared with other busy processes (the
// development box: 2 cores, load ~10), every region can wait a scheduler time
// slice for a descheduled partner thread, and primitives that synchronise
// their threads with spin barriers (batch normalisation) collapse: 32x256x56x56
// bn forward+backward took 23+25 ms on one thread, 50-240 + 50-65 ms on two
// (4 s each in nchw). So, by kind of work:
enum class Work {
  kCompute,   // conv, inner product, matmul: all threads, always
  kMemory,    // memory-bound (reorder, eltwise, sum, pooling, ...): one
              // thread when it touches less than kSmallWorkBytes, where
              // a second thread gains microseconds and risks a time slice
  kOneThread  // batch normalisation (spin barriers; create it under a
              // ThreadCap(1) too), and tiny compute
};
inline constexpr size_t kSmallWorkBytes = size_t{16} << 20;

// A primitive, the scratchpad it needs and its thread cap (0: none).
struct Prim {
  dnnl::primitive primitive;
  dnnl::memory::desc scratchpad;
  int max_threads = 0;
};

// Bytes a primitive reads and writes (its src, dst, weights and their diffs).
size_t WorkBytes(const dnnl::primitive_desc_base& pd);

template <typename PrimitiveDesc>
Prim MakePrim(const PrimitiveDesc& pd, Work work) {
  int max_threads = 0;
  if (work == Work::kOneThread || (work == Work::kMemory && WorkBytes(pd) < kSmallWorkBytes)) max_threads = 1;
  return {dnnl::primitive(pd.get()), pd.scratchpad_desc(), max_threads};
}

// Caps the OpenMP threads oneDNN uses (to create and run primitives) within
// a scope to `max_threads`; no-op when the cap is not below the current count.
class ThreadCap {
 public:
  explicit ThreadCap(int max_threads);
  ~ThreadCap();
  ThreadCap(const ThreadCap&) = delete;
  ThreadCap& operator=(const ThreadCap&) = delete;

 private:
  int saved_ = 0;
};

// Runs `p` with the context's scratchpad on its stream, under its thread
// cap, and waits for it.
void Run(CpuContext& ctx, const Prim& p, std::unordered_map<int, dnnl::memory> args);

// Multi-input primitives (sum, concat): the descriptors of the inputs, in
// order (what their primitive caches are keyed by), and one run of such a
// primitive with input i viewed as srcs[i] and `output` as dst.
std::vector<dnnl::memory::desc> DescsOf(absl::Span<const Tensor> tensors);
void RunMultiSource(CpuContext& ctx, const Prim& p, const std::vector<dnnl::memory::desc>& srcs,
                    absl::Span<const Tensor> inputs, const dnnl::memory::desc& dst, const Tensor& output);

// A reorder from layout `from` to layout `to`, made when they differ, with
// the staging buffer that holds the side a caller does not own.
//   Input use (the caller has t in `from`; a primitive wants `to`):
//     Get(ctx, t) reorders t into staging and returns it; Last(ctx, t) returns
//     that result again without work.
//   Output use (the caller owns t in `to`; a primitive writes `from`):
//     Target(ctx, t) is where the primitive writes; Commit(ctx, t) moves it
//     into t.
// When from == to all four are views of t.
//
// Staging: by default the conversion owns it, so Last() works across calls
// (a layer's forward and backward) and it costs its bytes for good. With a
// `shared_slot` >= 0 it is the context's shared staging slot of that number
// (CpuContext::Staging), which every layer of the context reuses: valid only
// until the next conversion through that slot, so for conversions made and
// consumed within one layer call (Last() only within the call). A padded
// staging desc is zeroed before each use (its padding must be zero, and a
// shared slot holds other layers' bytes).
class Conversion {
 public:
  static constexpr int kOwnStaging = -1;
  // The shared slots layers use, one per role, so that the conversions of
  // one layer call never share a slot.
  static constexpr int kSrcSlot = 0;             // the input, in the primitive's format and type
  static constexpr int kDiffDstSlot = 1;         // the output's gradient, for backward-data
  static constexpr int kDiffSrcSlot = 2;         // the input's gradient, before it goes back
  static constexpr int kWeightsDiffDstSlot = 3;  // the output's gradient, for backward-weights
  static constexpr int kDiffWeightsSlot = 4;     // the weight gradient, before it goes plain

  Conversion() = default;
  Conversion(CpuContext& ctx, const dnnl::memory::desc& from, const dnnl::memory::desc& to,
             int shared_slot = kOwnStaging);

  bool needed() const { return reorder_.has_value(); }
  const dnnl::memory::desc& from() const { return from_; }
  const dnnl::memory::desc& to() const { return to_; }

  dnnl::memory Get(CpuContext& ctx, const Tensor& t);
  dnnl::memory Last(CpuContext& ctx, const Tensor& t) const;
  dnnl::memory Target(CpuContext& ctx, const Tensor& t) const;
  void Commit(CpuContext& ctx, const Tensor& t);

 private:
  // The staging buffer viewed as `desc`, zeroed first when `zero_padding`
  // and the staging pads.
  dnnl::memory Staged(CpuContext& ctx, const dnnl::memory::desc& desc, bool zero_padding) const;

  dnnl::memory::desc from_, to_;
  std::optional<Prim> reorder_;
  int shared_slot_ = kOwnStaging;
  size_t staging_bytes_ = 0;
  bool staging_pads_ = false;
  Tensor staging_;  // own staging: holds `to` (input use) or `from` (output use)
};

}  // namespace pstrain::cpu
