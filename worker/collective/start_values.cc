#include "worker/collective/start_values.h"

#include <zlib.h>

#include "common/status_macros.h"

namespace pstrain {
namespace {

uLong Crc(uLong crc, const void* data, size_t bytes) { return crc32_z(crc, static_cast<const Bytef*>(data), bytes); }

}  // namespace

uint32_t StartValuesDigest(const std::vector<absl::Span<float>>& buffers) {
  uLong crc = crc32_z(0L, Z_NULL, 0);
  for (absl::Span<float> b : buffers) {
    const uint64_t count = b.size();
    crc = Crc(crc, &count, sizeof(count));
    crc = Crc(crc, b.data(), b.size() * sizeof(float));
  }
  return static_cast<uint32_t>(crc);
}

absl::StatusOr<bool> AgreeOrBroadcast(Collective& collective, const std::vector<absl::Span<float>>& buffers) {
  const uint32_t mine = StartValuesDigest(buffers);
  // 16-bit halves: integers a float holds exactly.
  float chiefs[2] = {static_cast<float>(mine >> 16), static_cast<float>(mine & 0xffff)};
  PSTRAIN_RETURN_IF_ERROR(collective.Broadcast(chiefs, 2, /*root=*/0));
  const uint32_t chief = (static_cast<uint32_t>(chiefs[0]) << 16) | static_cast<uint32_t>(chiefs[1]);
  float differing = chief == mine ? 0.0f : 1.0f;
  PSTRAIN_RETURN_IF_ERROR(collective.AllReduceSum(&differing, 1));
  if (differing == 0) return false;
  for (absl::Span<float> b : buffers) PSTRAIN_RETURN_IF_ERROR(collective.Broadcast(b.data(), b.size(), 0));
  return true;
}

}  // namespace pstrain
