// Compressed pushes (config `compression`, common/compression/): a push whose
// tensors travel as 16-bit values or as top-k (index, value) pairs is
// expanded into float32 gradients before any variable is touched, so a
// malformed encoding is refused with nothing changed, and the consistency
// policies see float32 gradients whatever the wire carried.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "common/transport/frame.h"
#include "proto/ps.pb.h"

namespace pstrain {

// True when some tensor of `request` is not dense float32.
bool PushIsEncoded(const PushRequest& request);

// Reads every tensor of `request` from `payload` (whose size the caller has
// checked against the headers) and returns one frame per tensor holding its
// `elements[i]` float32 values. InvalidArgument naming the tensor for an
// unknown dtype or a sparse index outside [0, elements). Sparse duplicates
// add up.
absl::StatusOr<std::vector<IncomingFrame>> DecodePushTensors(const PushRequest& request,
                                                             const std::vector<int64_t>& elements,
                                                             IncomingFrame& payload);

}  // namespace pstrain
