#include "common/allocator_tuning.h"

#include <malloc.h>

namespace pstrain {

void TuneAllocatorForBulkTraffic() {
  mallopt(M_MMAP_THRESHOLD, 256 * 1024 * 1024);   // buffers below this come from the heap
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);  // keep up to 1 GiB of freed heap for reuse
}

}  // namespace pstrain
