#include "device/cuda/half_nhwc_layout.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pstrain::cuda {

NchwExtents ExtentsOf(const Shape& shape) {
  CHECK(shape.size() >= 2 && shape.size() <= 4)
      << "a channels-last tensor is [N, C], [N, C, H] or [N, C, H, W], not " << ShapeToString(shape);
  NchwExtents e{.n = shape[0], .c = shape[1], .hw = 1};
  for (size_t i = 2; i < shape.size(); ++i) e.hw *= shape[i];
  return e;
}

HalfNhwcLayout::HalfNhwcLayout(const Shape& shape, HalfType type)
    : shape_(shape), type_(type), extents_(ExtentsOf(shape)) {}

bool HalfNhwcLayout::Equals(const TensorLayout& other) const {
  const auto* o = dynamic_cast<const HalfNhwcLayout*>(&other);
  return o != nullptr && o->type_ == type_ && o->shape_ == shape_;
}

std::string HalfNhwcLayout::ToString() const {
  return absl::StrCat("nhwc ", HalfTypeName(type_), " ", ShapeToString(shape_));
}

TensorLayoutPtr MakeHalfNhwcLayout(const Shape& shape, HalfType type) {
  return std::make_shared<const HalfNhwcLayout>(shape, type);
}

const HalfNhwcLayout* AsHalfNhwc(const TensorLayoutPtr& layout) {
  return dynamic_cast<const HalfNhwcLayout*>(layout.get());
}

}  // namespace pstrain::cuda
