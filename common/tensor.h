// Tensor: a shape, a dtype, a device and a buffer that is owned or borrowed.
//
// Tensors are cheap handles: copying one shares its buffer (like a
// shared_ptr). Data is dense row-major unless the tensor carries a
// TensorLayout (see below). Only float32 exists today; the dtype travels on
// the wire so others can follow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pstrain {

enum class DType { kFloat32 };
size_t DTypeSize(DType dtype);

enum class DeviceKind { kCpu, kCuda };
// Configs name device kinds through the device layer's registry
// (device/device_registry.h: "cpu", "gpu", ...).

// A device a tensor lives on: kind plus ordinal (GPU number).
struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int ordinal = 0;
  static Device Cpu() { return {}; }
  bool operator==(const Device&) const = default;
  std::string ToString() const;
};

using Shape = std::vector<int64_t>;
int64_t NumElements(const Shape& shape);
// NumElements of a shape read from outside bytes: -1 when a dimension is
// negative or the count is so large its bytes (8 per element and more)
// would not fit in int64.
int64_t CheckedNumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);

// An opaque, device-specific arrangement of a tensor's elements in its
// buffer, e.g. a oneDNN blocked format such as nChw8c. Layers choose layouts
// for the activations they pass between themselves; everything else
// (variables, their gradients, a model's inputs and outputs, anything sent to
// a parameter server) is plain: dense row-major, with no layout attached.
// Immutable; shared between tensors.
class TensorLayout {
 public:
  virtual ~TensorLayout() = default;
  // Bytes the buffer needs; blocked formats pad, so this may exceed
  // num_elements * dtype size.
  virtual size_t num_bytes() const = 0;
  virtual bool Equals(const TensorLayout& other) const = 0;
  virtual std::string ToString() const = 0;
};
using TensorLayoutPtr = std::shared_ptr<const TensorLayout>;
// Null means plain; two nulls are the same layout.
bool SameLayout(const TensorLayoutPtr& a, const TensorLayoutPtr& b);

// A block of bytes; aligned to 64 bytes when allocated here.
class Buffer {
 public:
  // Allocates `bytes` (zero-filled) on the CPU. From kFreshPagesBytes up
  // they are pages of their own from the kernel, zero until written and
  // taking memory only where touched (a variable an emulated model never
  // writes costs nothing); below, heap memory cleared here.
  static std::shared_ptr<Buffer> Allocate(size_t bytes);
  static constexpr size_t kFreshPagesBytes = size_t{1} << 20;
  // The same without the zero fill, for a caller that writes every byte
  // before anyone reads (an optimizer's next value, an encoding).
  static std::shared_ptr<Buffer> AllocateUninitialized(size_t bytes);
  // Wraps memory owned elsewhere; `owner` keeps it alive (may be null when the
  // caller guarantees the lifetime).
  static std::shared_ptr<Buffer> Borrow(void* data, size_t bytes, std::shared_ptr<void> owner);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  Buffer(void* data, size_t size, bool owned, std::shared_ptr<void> owner)
      : data_(data), size_(size), owned_(owned), owner_(std::move(owner)) {}
  void* data_;
  size_t size_;
  bool owned_;
  std::shared_ptr<void> owner_;
};

class Tensor {
 public:
  Tensor() = default;
  // Allocates a zero-filled tensor on the CPU.
  Tensor(Shape shape, DType dtype = DType::kFloat32);
  // Views `buffer` (which must hold at least the tensor's bytes).
  Tensor(Shape shape, DType dtype, std::shared_ptr<Buffer> buffer);
  // Allocates a zero-filled float32 CPU tensor laid out as `layout` (plain
  // when null, i.e. the same as Tensor(shape)).
  Tensor(Shape shape, TensorLayoutPtr layout);
  // Views `buffer`, memory of `device` (e.g. a GPU allocation; data() is then
  // a device pointer that host code must not dereference), laid out as
  // `layout` (null: plain).
  Tensor(Shape shape, DType dtype, std::shared_ptr<Buffer> buffer, Device device, TensorLayoutPtr layout = nullptr);

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i); }
  int rank() const { return static_cast<int>(shape_.size()); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t num_elements() const { return num_elements_; }
  // Bytes of buffer the elements occupy (the layout's size when there is one).
  size_t num_bytes() const { return layout_ ? layout_->num_bytes() : num_elements_ * DTypeSize(dtype_); }
  // Null for plain (dense row-major) tensors.
  const TensorLayoutPtr& layout() const { return layout_; }
  bool is_plain() const { return layout_ == nullptr; }
  bool on_host() const { return device_.kind == DeviceKind::kCpu; }
  bool empty() const { return buffer_ == nullptr; }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

  // data() and span() index elements row-major only for plain tensors; a
  // laid-out tensor's buffer is for the device code that owns its layout.
  void* raw() const { return buffer_ ? buffer_->data() : nullptr; }
  float* data() const { return static_cast<float*>(raw()); }
  absl::Span<float> span() const;

  // Clone(), SetZero() and CopyFrom() touch the bytes from the host: host
  // tensors only (device tensors go through their DeviceContext).
  // A deep copy with its own buffer (and the same layout).
  Tensor Clone() const;
  // Same buffer, different shape with the same element count. Plain only.
  Tensor Reshaped(Shape shape) const;
  void SetZero() const;
  // Copies the buffer of `other` (same layout, same byte count; shapes may
  // differ for plain tensors of one element count) into this tensor.
  void CopyFrom(const Tensor& other) const;

 private:
  Shape shape_;
  DType dtype_ = DType::kFloat32;
  Device device_;
  int64_t num_elements_ = 0;
  std::shared_ptr<Buffer> buffer_;
  TensorLayoutPtr layout_;  // null: plain
};

}  // namespace pstrain
