#include "common/tensor.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace pstrain {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
  }
  return 0;
}

std::string Device::ToString() const { return kind == DeviceKind::kCpu ? "cpu" : absl::StrCat("gpu:", ordinal); }

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t CheckedNumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<int64_t>::max() / 8 / d)) return -1;
    n *= d;
  }
  return n;
}

std::string ShapeToString(const Shape& shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

bool SameLayout(const TensorLayoutPtr& a, const TensorLayoutPtr& b) {
  if (a == nullptr || b == nullptr) return a == b;
  return a == b || a->Equals(*b);
}

std::shared_ptr<Buffer> Buffer::AllocateUninitialized(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  CHECK(p != nullptr) << "out of memory allocating " << bytes << " bytes";
  return std::shared_ptr<Buffer>(new Buffer(p, bytes, /*owned=*/true, nullptr));
}

std::shared_ptr<Buffer> Buffer::Allocate(size_t bytes) {
  if (bytes >= kFreshPagesBytes) {  // page-aligned, so 64-byte aligned; the kernel zeroes a page when first touched
    void* pages = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(pages != MAP_FAILED) << "out of memory allocating " << bytes << " bytes: " << std::strerror(errno);
    return Borrow(pages, bytes, std::shared_ptr<void>(pages, [bytes](void* p) { munmap(p, bytes); }));
  }
  std::shared_ptr<Buffer> buffer = AllocateUninitialized(bytes);
  std::memset(buffer->data(), 0, (bytes + 63) / 64 * 64);
  return buffer;
}

std::shared_ptr<Buffer> Buffer::Borrow(void* data, size_t bytes, std::shared_ptr<void> owner) {
  return std::shared_ptr<Buffer>(new Buffer(data, bytes, /*owned=*/false, std::move(owner)));
}

Buffer::~Buffer() {
  if (owned_) std::free(data_);
}

Tensor::Tensor(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype), num_elements_(NumElements(shape_)) {
  buffer_ = Buffer::Allocate(num_bytes());
}

Tensor::Tensor(Shape shape, DType dtype, std::shared_ptr<Buffer> buffer)
    : shape_(std::move(shape)), dtype_(dtype), num_elements_(NumElements(shape_)), buffer_(std::move(buffer)) {
  CHECK(buffer_ != nullptr);
  CHECK_GE(buffer_->size(), num_bytes()) << "buffer too small for " << ShapeToString(shape_);
}

Tensor::Tensor(Shape shape, TensorLayoutPtr layout)
    : shape_(std::move(shape)), num_elements_(NumElements(shape_)), layout_(std::move(layout)) {
  buffer_ = Buffer::Allocate(num_bytes());
}

Tensor::Tensor(Shape shape, DType dtype, std::shared_ptr<Buffer> buffer, Device device, TensorLayoutPtr layout)
    : shape_(std::move(shape)),
      dtype_(dtype),
      device_(device),
      num_elements_(NumElements(shape_)),
      buffer_(std::move(buffer)),
      layout_(std::move(layout)) {
  CHECK(buffer_ != nullptr);
  CHECK_GE(buffer_->size(), num_bytes()) << "buffer too small for " << ShapeToString(shape_);
}

absl::Span<float> Tensor::span() const {
  CHECK(is_plain()) << "span() of a tensor laid out as " << layout_->ToString();
  return {data(), static_cast<size_t>(num_elements_)};
}

Tensor Tensor::Clone() const {
  CHECK(on_host()) << "Clone() of a tensor on " << device_.ToString();
  Tensor t = layout_ ? Tensor(shape_, layout_) : Tensor(shape_, dtype_);
  if (num_bytes() > 0) std::memcpy(t.raw(), raw(), num_bytes());
  return t;
}

Tensor Tensor::Reshaped(Shape shape) const {
  CHECK(is_plain()) << "Reshaped() of a tensor laid out as " << layout_->ToString();
  CHECK_EQ(NumElements(shape), num_elements_) << ShapeToString(shape_) << " -> " << ShapeToString(shape);
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

void Tensor::SetZero() const {
  CHECK(on_host()) << "SetZero() of a tensor on " << device_.ToString();
  if (num_bytes() > 0) std::memset(raw(), 0, num_bytes());
}

void Tensor::CopyFrom(const Tensor& other) const {
  CHECK(on_host() && other.on_host()) << "CopyFrom() between " << other.device_.ToString() << " and "
                                      << device_.ToString() << ": use the DeviceContext";
  CHECK_EQ(other.num_bytes(), num_bytes());
  CHECK(SameLayout(layout_, other.layout_)) << "CopyFrom between layouts " << (layout_ ? layout_->ToString() : "plain")
                                            << " and " << (other.layout_ ? other.layout_->ToString() : "plain");
  if (num_bytes() > 0) std::memcpy(raw(), other.raw(), num_bytes());
}

}  // namespace pstrain
