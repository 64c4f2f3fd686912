#include "common/placement.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<std::vector<int>> PlaceVariables(const std::vector<VariableSize>& variables, int num_shards,
                                                const std::string& policy) {
  if (num_shards <= 0) return absl::InvalidArgumentError(absl::StrCat("placement: ", num_shards, " shards"));
  std::vector<int> plan(variables.size(), 0);
  if (policy == "round_robin") {
    for (size_t i = 0; i < variables.size(); ++i) plan[i] = static_cast<int>(i % num_shards);
    return plan;
  }
  if (policy == "greedy") {
    std::vector<size_t> order(variables.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return variables[a].bytes > variables[b].bytes; });
    std::vector<int64_t> load(num_shards, 0);
    for (size_t i : order) {
      int best = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      plan[i] = best;
      load[best] += variables[i].bytes;
    }
    return plan;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown placement '", policy, "'; known: round_robin, greedy"));
}

std::vector<int64_t> ShardBytes(const std::vector<VariableSize>& variables, const std::vector<int>& plan,
                                int num_shards) {
  std::vector<int64_t> bytes(num_shards, 0);
  for (size_t i = 0; i < variables.size(); ++i) bytes[plan[i]] += variables[i].bytes;
  return bytes;
}

}  // namespace pstrain
