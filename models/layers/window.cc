#include "models/layers/window.h"

#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// One int or two; `what` names the attribute in errors.
absl::StatusOr<std::pair<int64_t, int64_t>> Pair(const LayerSpec& spec, const std::string& type,
                                                 const std::string& what, const std::vector<int64_t>& fallback,
                                                 int64_t min_value) {
  std::vector<int64_t> v = spec.GetInts(what, fallback);
  if (v.empty()) return absl::InvalidArgumentError(absl::StrCat(type, " needs a \"", what, "\" attribute"));
  if (v.size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat(type, " \"", what, "\" takes 1 or 2 ints, got ", ShapeToString(v)));
  }
  if (v.size() == 1) v.push_back(v[0]);
  if (v[0] < min_value || v[1] < min_value) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, " \"", what, "\" must be >= ", min_value, ", got ", ShapeToString(v)));
  }
  return std::make_pair(v[0], v[1]);
}

}  // namespace

std::string Window2d::ToString() const {
  return absl::StrCat("kernel [", kh, ",", kw, "] stride [", sh, ",", sw, "] padding [", ph, ",", pw, "]");
}

absl::StatusOr<Window2d> ReadWindow(const LayerSpec& spec, const std::string& type,
                                    const std::vector<int64_t>& default_stride,
                                    const std::vector<int64_t>& default_kernel) {
  Window2d w;
  PSTRAIN_ASSIGN_OR_RETURN(auto kernel, Pair(spec, type, "kernel", default_kernel, 1));
  PSTRAIN_ASSIGN_OR_RETURN(
      auto stride,
      Pair(spec, type, "stride",
           default_stride.empty() ? std::vector<int64_t>{kernel.first, kernel.second} : default_stride, 1));
  PSTRAIN_ASSIGN_OR_RETURN(auto padding, Pair(spec, type, "padding", {0, 0}, 0));
  std::tie(w.kh, w.kw) = kernel;
  std::tie(w.sh, w.sw) = stride;
  std::tie(w.ph, w.pw) = padding;
  return w;
}

absl::Status CheckWindowFits(const std::string& type, const Window2d& window, const Shape& input) {
  if (input.size() != 3 || input[0] <= 0 || input[1] <= 0 || input[2] <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, " input must be [channels, height, width], got ", ShapeToString(input)));
  }
  if (input[1] + 2 * window.ph < window.kh || input[2] + 2 * window.pw < window.kw) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, " window (", window.ToString(), ") is larger than the padded input ", ShapeToString(input)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Window2d> ReadPoolingWindow(const LayerSpec& spec, const std::string& type, const Shape& input,
                                           bool global) {
  Window2d window;
  if (global) {
    if (input.size() != 3 || NumElements(input) <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(type, " input must be [channels, height, width], got ", ShapeToString(input)));
    }
    window = Window2d{input[1], input[2], 1, 1, 0, 0};
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(window, ReadWindow(spec, type, {}));
    if (window.ph >= window.kh || window.pw >= window.kw) {
      return absl::InvalidArgumentError(
          absl::StrCat(type, " padding must be smaller than the kernel, got ", window.ToString()));
    }
  }
  PSTRAIN_RETURN_IF_ERROR(CheckWindowFits(type, window, input));
  return window;
}

}  // namespace pstrain
