#include "common/metrics/memory_usage.h"

#include <sys/resource.h>

namespace pstrain {

int64_t PeakRssBytes() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux: kilobytes
}

}  // namespace pstrain
