#include "ps/shard/request_checks.h"

#include "absl/strings/str_cat.h"
#include "common/compression/compression.h"

namespace pstrain {

absl::Status CheckTensorHeader(const TensorHeader& h, const Shape& expected_shape, int64_t expected_n, const char* what,
                               bool encoded) {
  Shape shape(h.shape().begin(), h.shape().end());
  const size_t size = WireDTypeSize(h.dtype());
  if (h.dtype() != DT_FLOAT32 && (!encoded || size == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", h.name(), ": dtype must be ", encoded ? "float32, float16 or bfloat16" : "float32"));
  }
  if (shape != expected_shape) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", h.name(), ": shape ", ShapeToString(shape),
                                                   " but the variable is ", ShapeToString(expected_shape)));
  }
  if (h.sparse_count() > 0) {
    if (!encoded) return absl::InvalidArgumentError(absl::StrCat(what, " ", h.name(), ": must be dense"));
    if (h.sparse_count() > static_cast<uint64_t>(expected_n)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", h.name(), ": ", h.sparse_count(),
                                                     " sparse elements but the variable has ", expected_n));
    }
    if (h.num_bytes() != h.sparse_count() * (sizeof(uint32_t) + size)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", h.name(), ": ", h.num_bytes(), " bytes but ",
                                                     h.sparse_count(), " sparse elements need ",
                                                     h.sparse_count() * (sizeof(uint32_t) + size)));
    }
    return absl::OkStatus();
  }
  if (h.num_bytes() != static_cast<uint64_t>(expected_n) * size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", h.name(), ": ", h.num_bytes(), " bytes but the variable needs ", expected_n * size));
  }
  return absl::OkStatus();
}

absl::Status CheckPayloadSize(const IncomingFrame& payload, uint64_t declared, const char* what) {
  if (payload.payload_bytes() != declared) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": headers declare ", declared, " payload bytes but ", payload.payload_bytes(), " arrived"));
  }
  return absl::OkStatus();
}

}  // namespace pstrain
