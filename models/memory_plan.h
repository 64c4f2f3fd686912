// Memory planning: buffers whose lifetimes are known before a step runs are
// placed in one arena, so that buffers never alive at the same time share
// bytes (what frameworks' static memory planners do for activations and
// gradients).
//
// A lifetime is an inclusive range of step times [first_use, last_use]: the
// buffer is written at first_use and last read at last_use. Two buffers may
// overlap in the arena only when their ranges are disjoint, so a layer that
// reads one buffer and writes another at the same time never sees its input
// overwritten.
//
// Placement is greedy by size (largest first), each buffer going into the
// smallest gap between the already placed buffers whose lifetimes it
// overlaps, or above them all. Not optimal (the problem is NP-hard), usually
// within a few percent of the peak of live bytes (LiveBytesPeak()), which
// bounds every placement from below.
#pragma once

#include <cstddef>
#include <vector>

namespace pstrain {

struct BufferLifetime {
  size_t bytes = 0;
  int first_use = 0;  // inclusive
  int last_use = 0;   // inclusive; >= first_use
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // [buffer]: byte offset in the arena, a multiple of the alignment
  size_t arena_bytes = 0;       // the arena all buffers fit in
  size_t total_bytes = 0;       // what separate buffers would take (sizes rounded to the alignment)
};

// Places `buffers` (sizes rounded up to `alignment`, a power of two).
MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers, size_t alignment = 64);

// The largest sum of (rounded) sizes of buffers alive at one time: no
// arena can be smaller.
size_t LiveBytesPeak(const std::vector<BufferLifetime>& buffers, size_t alignment = 64);

}  // namespace pstrain
