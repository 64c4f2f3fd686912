// The 2-D sliding window shared by convolution and pooling layers on every
// device: attribute parsing, validation and output-size arithmetic.
//
// Attributes: "kernel" [kh, kw], "stride" [sh, sw], "padding" [ph, pw]
// (symmetric: ph rows above and below). Each may also be given as one int
// for both dims. Output size per axis, floor mode: (x + 2p - k) / s + 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/layers/layer.h"

namespace pstrain {

struct Window2d {
  int64_t kh = 0, kw = 0;  // kernel
  int64_t sh = 1, sw = 1;  // stride
  int64_t ph = 0, pw = 0;  // padding, each side

  int64_t OutH(int64_t h) const { return (h + 2 * ph - kh) / sh + 1; }
  int64_t OutW(int64_t w) const { return (w + 2 * pw - kw) / sw + 1; }
  std::string ToString() const;  // "kernel [3,3] stride [1,1] padding [1,1]"
};

// Reads the window of layer `type` from `spec`. "kernel" is required unless
// `default_kernel` is given; "stride" defaults to `default_stride` or, when
// that is empty, to the kernel; "padding" to [0, 0]. InvalidArgument for
// missing, malformed or non-positive values (padding may be 0).
absl::StatusOr<Window2d> ReadWindow(const LayerSpec& spec, const std::string& type,
                                    const std::vector<int64_t>& default_stride,
                                    const std::vector<int64_t>& default_kernel = {});

// Checks that `input` is [C, H, W] with positive dims and that the window
// fits the padded input. InvalidArgument naming `type`, the input shape and
// the window otherwise.
absl::Status CheckWindowFits(const std::string& type, const Window2d& window, const Shape& input);

// The window of pooling layer `type` over `input` ([C, H, W]). A global pool's
// window is the whole input (stride 1, no padding) and ignores the spec;
// otherwise the spec gives "kernel" (required), "stride" (default: the kernel)
// and "padding" (default 0, each side, smaller than the kernel). The window
// is checked to fit the input (CheckWindowFits).
absl::StatusOr<Window2d> ReadPoolingWindow(const LayerSpec& spec, const std::string& type, const Shape& input,
                                           bool global);

}  // namespace pstrain
