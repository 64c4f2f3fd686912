// A transfer layout as people read it (LayoutText, layout_text.h).
#include "common/metrics/layout_text.h"

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

std::string Size(int64_t bytes) {
  if (bytes == 0) return "none";
  if (bytes % (int64_t{1} << 20) == 0) return absl::StrCat(bytes >> 20, " MiB");
  return absl::StrCat(bytes >> 10, " KiB");
}

}  // namespace

std::string LayoutText(int64_t batch_bytes, int64_t window_bytes, int pushes_per_shard) {
  return absl::StrCat("batch ", Size(batch_bytes), ", window ", Size(window_bytes), ", ", pushes_per_shard,
                      " per shard");
}

}  // namespace pstrain
