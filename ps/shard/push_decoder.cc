#include "ps/shard/push_decoder.h"

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/compression/compression.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// A frame whose one piece is `values`, kept alive by the frame.
IncomingFrame FloatFrame(std::shared_ptr<std::vector<float>> values) {
  std::vector<IncomingFrame::Piece> pieces;
  if (!values->empty()) {
    pieces.push_back({reinterpret_cast<const char*>(values->data()), values->size() * sizeof(float)});
  }
  return IncomingFrame("", std::move(pieces), std::move(values));
}

}  // namespace

bool PushIsEncoded(const PushRequest& request) {
  for (const TensorHeader& h : request.tensors()) {
    if (h.dtype() != DT_FLOAT32 || h.sparse_count() > 0) return true;
  }
  return false;
}

absl::StatusOr<std::vector<IncomingFrame>> DecodePushTensors(const PushRequest& request,
                                                             const std::vector<int64_t>& elements,
                                                             IncomingFrame& payload) {
  std::vector<IncomingFrame> frames;
  std::vector<char> wire;
  for (int t = 0; t < request.tensors_size(); ++t) {
    const TensorHeader& h = request.tensors(t);
    const int64_t n = elements[t];
    const size_t size = WireDTypeSize(h.dtype());
    if (size == 0) {
      return absl::InvalidArgumentError(absl::StrCat("push ", h.name(), ": unknown dtype ", h.dtype()));
    }
    wire.resize(h.num_bytes());
    PSTRAIN_RETURN_IF_ERROR(payload.Read(wire.data(), wire.size()));
    auto values = std::make_shared<std::vector<float>>(static_cast<size_t>(n), 0.0f);
    if (h.sparse_count() == 0) {
      DecodeFloats(h.dtype(), wire.data(), static_cast<size_t>(n), values->data());
    } else {
      const uint64_t k = h.sparse_count();
      std::vector<float> sent(k);
      DecodeFloats(h.dtype(), wire.data() + k * sizeof(uint32_t), k, sent.data());
      for (uint64_t j = 0; j < k; ++j) {
        uint32_t index;
        std::memcpy(&index, wire.data() + j * sizeof(uint32_t), sizeof(index));
        if (index >= static_cast<uint64_t>(n)) {
          return absl::InvalidArgumentError(
              absl::StrCat("push ", h.name(), ": sparse index ", index, " outside [0, ", n, ")"));
        }
        (*values)[index] += sent[j];
      }
    }
    frames.push_back(FloatFrame(std::move(values)));
  }
  return frames;
}

}  // namespace pstrain
