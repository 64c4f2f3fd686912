#include "models/memory_plan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

#include "glog/logging.h"

namespace pstrain {
namespace {

size_t RoundUp(size_t bytes, size_t alignment) { return (bytes + alignment - 1) & ~(alignment - 1); }

bool Overlap(const BufferLifetime& a, const BufferLifetime& b) {
  return a.first_use <= b.last_use && b.first_use <= a.last_use;
}

}  // namespace

MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers, size_t alignment) {
  CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0) << "alignment " << alignment;
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by start, then index, so plans are reproducible.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first_use < buffers[b].first_use;
  });
  std::vector<size_t> placed;
  for (size_t i : order) {
    const BufferLifetime& buffer = buffers[i];
    CHECK_LE(buffer.first_use, buffer.last_use) << "buffer " << i;
    const size_t size = RoundUp(buffer.bytes, alignment);
    plan.total_bytes += size;
    // The ranges [offset, end) of placed buffers alive at the same time, by offset.
    std::vector<std::pair<size_t, size_t>> taken;
    for (size_t j : placed) {
      if (Overlap(buffer, buffers[j])) {
        taken.emplace_back(plan.offsets[j], plan.offsets[j] + RoundUp(buffers[j].bytes, alignment));
      }
    }
    std::sort(taken.begin(), taken.end());
    size_t best = std::numeric_limits<size_t>::max(), best_gap = std::numeric_limits<size_t>::max();
    size_t cursor = 0;
    for (const auto& [begin, end] : taken) {
      if (begin > cursor && begin - cursor >= size && begin - cursor < best_gap) {
        best = cursor;
        best_gap = begin - cursor;
      }
      cursor = std::max(cursor, end);
    }
    plan.offsets[i] = best != std::numeric_limits<size_t>::max() ? best : cursor;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[i] + size);
    placed.push_back(i);
  }
  return plan;
}

size_t LiveBytesPeak(const std::vector<BufferLifetime>& buffers, size_t alignment) {
  std::map<int, long long> delta;  // time -> change in live bytes
  for (const BufferLifetime& b : buffers) {
    const auto size = static_cast<long long>(RoundUp(b.bytes, alignment));
    delta[b.first_use] += size;
    delta[b.last_use + 1] -= size;
  }
  long long live = 0, peak = 0;
  for (const auto& [time, change] : delta) {
    live += change;
    peak = std::max(peak, live);
  }
  return static_cast<size_t>(peak);
}

}  // namespace pstrain
