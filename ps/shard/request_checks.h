// Checks of the tensors a request declares (Init, Push), made before anything
// changes: a malformed request is INVALID_ARGUMENT naming `what` ("init",
// "push") and the tensor.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "common/tensor.h"
#include "common/transport/frame.h"
#include "proto/ps.pb.h"

namespace pstrain {

// `h` declares a tensor of `expected_shape` (`expected_n` elements) with a
// byte count that matches. `encoded`: the tensor may travel compressed
// (pushes): 16-bit dtypes, and sparse (top-k) payloads of sparse_count
// indices and values. Otherwise dense float32 only (init).
absl::Status CheckTensorHeader(const TensorHeader& h, const Shape& expected_shape, int64_t expected_n, const char* what,
                               bool encoded = false);

// The payload is exactly the `declared` bytes its headers add up to.
absl::Status CheckPayloadSize(const IncomingFrame& payload, uint64_t declared, const char* what);

}  // namespace pstrain
