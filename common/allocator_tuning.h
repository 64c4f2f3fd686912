// Allocator settings for processes that move large tensors.
//
// gRPC and the PS allocate and free multi-megabyte buffers every step. With
// glibc's defaults each such buffer is a fresh mmap, so every step pays page
// faults on memory it just gave back. Raising the mmap and trim thresholds
// keeps those buffers in the heap for reuse. Call once, early in main().
#pragma once

namespace pstrain {

void TuneAllocatorForBulkTraffic();

}  // namespace pstrain
