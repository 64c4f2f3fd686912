#include "device/cpu/dnnl_util.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain::cpu {

bool DnnlLayout::Equals(const TensorLayout& other) const {
  const auto* o = dynamic_cast<const DnnlLayout*>(&other);
  return o != nullptr && o->desc_ == desc_;
}

std::string DnnlLayout::ToString() const {
  const dnnl_memory_desc_t& d = desc_.data;
  std::string s = absl::StrCat("dnnl", ShapeToString(DimsOf(desc_)));
  if (d.format_kind != dnnl_blocked) return absl::StrCat(s, " (not blocked)");
  const auto& b = d.format_desc.blocking;
  absl::StrAppend(&s, " strides ", ShapeToString(Shape(b.strides, b.strides + d.ndims)));
  if (b.inner_nblks > 0) {
    absl::StrAppend(&s, " blocks");
    for (int i = 0; i < b.inner_nblks; ++i) absl::StrAppend(&s, " ", b.inner_blks[i], "@", b.inner_idxs[i]);
  }
  return s;
}

dnnl::memory::desc PlainDesc(const Shape& shape, dnnl::memory::data_type type) {
  dnnl::memory::dims dims(shape.begin(), shape.end());
  dnnl::memory::dims strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return dnnl::memory::desc(dims, type, strides);
}

dnnl::memory::desc AnyDesc(const Shape& shape, dnnl::memory::data_type type) {
  return dnnl::memory::desc(dnnl::memory::dims(shape.begin(), shape.end()), type, dnnl::memory::format_tag::any);
}

dnnl::memory::data_type ComputeType(const CpuContext& ctx) {
  CHECK(ctx.precision() == Precision::kFp32 || ctx.precision() == Precision::kBf16)
      << "CPU layers compute in fp32 or bf16, not " << PrecisionName(ctx.precision());
  return ctx.precision() == Precision::kBf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

dnnl::memory::desc DescOf(const Tensor& t) {
  if (t.is_plain()) return PlainDesc(t.shape());
  const auto* layout = dynamic_cast<const DnnlLayout*>(t.layout().get());
  CHECK(layout != nullptr) << "a CPU layer got a tensor laid out as " << t.layout()->ToString();
  return layout->desc();
}

TensorLayoutPtr LayoutOf(const dnnl::memory::desc& desc) {
  if (desc == PlainDesc(DimsOf(desc))) return nullptr;
  return std::make_shared<DnnlLayout>(desc);
}

Shape DimsOf(const dnnl::memory::desc& desc) { return Shape(desc.data.dims, desc.data.dims + desc.data.ndims); }

dnnl::memory CheckedView(const dnnl::memory::desc& desc, const CpuContext& ctx, const Tensor& t) {
  CHECK(DescOf(t) == desc) << "tensor " << ShapeToString(t.shape()) << " is laid out as "
                           << (t.is_plain() ? "plain" : t.layout()->ToString()) << ", the primitive wants "
                           << DnnlLayout(desc).ToString();
  return View(desc, ctx, t);
}

dnnl::primitive_attr ScratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

ThreadCap::ThreadCap(int max_threads) {
  const int current = omp_get_max_threads();
  if (max_threads < current) {
    saved_ = current;
    omp_set_num_threads(max_threads);
  }
}

ThreadCap::~ThreadCap() {
  if (saved_ > 0) omp_set_num_threads(saved_);
}

size_t WorkBytes(const dnnl::primitive_desc_base& pd) {
  using dnnl::query;
  size_t bytes = 0;
  for (query q : {query::src_md, query::weights_md, query::diff_src_md, query::diff_weights_md}) {
    for (int i = 0;; ++i) {  // several for sum, concat, binary
      const size_t b = pd.query_md(q, i).get_size();
      if (b == 0) break;
      bytes += b;
    }
  }
  for (query q : {query::dst_md, query::diff_dst_md}) bytes += pd.query_md(q, 0).get_size();
  return bytes;
}

void Run(CpuContext& ctx, const Prim& p, std::unordered_map<int, dnnl::memory> args) {
  ThreadCap cap(p.max_threads > 0 ? p.max_threads : std::numeric_limits<int>::max());
  if (p.scratchpad.get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, ctx.Scratchpad(p.scratchpad));
  p.primitive.execute(ctx.stream(), args);
  ctx.stream().wait();
}

std::vector<dnnl::memory::desc> DescsOf(absl::Span<const Tensor> tensors) {
  std::vector<dnnl::memory::desc> descs;
  descs.reserve(tensors.size());
  for (const Tensor& t : tensors) descs.push_back(DescOf(t));
  return descs;
}

void RunMultiSource(CpuContext& ctx, const Prim& p, const std::vector<dnnl::memory::desc>& srcs,
                    absl::Span<const Tensor> inputs, const dnnl::memory::desc& dst, const Tensor& output) {
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_DST, CheckedView(dst, ctx, output)}};
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.emplace(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), View(srcs[i], ctx, inputs[i]));
  }
  Run(ctx, p, std::move(args));
}

Conversion::Conversion(CpuContext& ctx, const dnnl::memory::desc& from, const dnnl::memory::desc& to, int shared_slot)
    : from_(from), to_(to), shared_slot_(shared_slot) {
  if (from == to) return;
  reorder_ =
      MakePrim(dnnl::reorder::primitive_desc(ctx.engine(), from, ctx.engine(), to, ScratchpadAttr()), Work::kMemory);
  staging_bytes_ = std::max(from.get_size(), to.get_size());
  auto pads = [](const dnnl::memory::desc& d) {
    return d.get_size() > static_cast<size_t>(NumElements(DimsOf(d))) * dnnl::memory::data_type_size(d.data_type());
  };
  staging_pads_ = pads(from) || pads(to);
  if (shared_slot_ == kOwnStaging) {
    staging_ = Tensor({static_cast<int64_t>((staging_bytes_ + sizeof(float) - 1) / sizeof(float))});
  }
}

dnnl::memory Conversion::Staged(CpuContext& ctx, const dnnl::memory::desc& desc, bool zero_padding) const {
  if (shared_slot_ == kOwnStaging) return View(desc, ctx, staging_);
  void* bytes = ctx.Staging(shared_slot_, staging_bytes_);
  if (zero_padding && staging_pads_) std::memset(bytes, 0, staging_bytes_);
  return dnnl::memory(desc, ctx.engine(), bytes);
}

dnnl::memory Conversion::Get(CpuContext& ctx, const Tensor& t) {
  if (!needed()) return CheckedView(from_, ctx, t);
  dnnl::memory out = Staged(ctx, to_, /*zero_padding=*/true);
  Run(ctx, *reorder_, {{DNNL_ARG_FROM, CheckedView(from_, ctx, t)}, {DNNL_ARG_TO, out}});
  return out;
}

dnnl::memory Conversion::Last(CpuContext& ctx, const Tensor& t) const {
  return needed() ? Staged(ctx, to_, /*zero_padding=*/false) : View(from_, ctx, t);
}

dnnl::memory Conversion::Target(CpuContext& ctx, const Tensor& t) const {
  return needed() ? Staged(ctx, from_, /*zero_padding=*/true) : CheckedView(to_, ctx, t);
}

void Conversion::Commit(CpuContext& ctx, const Tensor& t) {
  if (!needed()) return;
  Run(ctx, *reorder_,
      {{DNNL_ARG_FROM, Staged(ctx, from_, /*zero_padding=*/false)}, {DNNL_ARG_TO, CheckedView(to_, ctx, t)}});
}

}  // namespace pstrain::cpu
