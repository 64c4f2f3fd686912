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
      absl::StrCat("unknown placement '", policy, "'; known: round_robin, greedy, partitioned"));
}

absl::StatusOr<std::vector<VariablePart>> PlanPlacement(const std::vector<VariableShape>& variables, int num_shards,
                                                        const std::string& policy, int64_t partition_bytes) {
  if (num_shards <= 0) return absl::InvalidArgumentError(absl::StrCat("placement: ", num_shards, " shards"));
  std::vector<VariableSize> sizes;
  for (const VariableShape& v : variables) {
    sizes.push_back({v.name, NumElements(v.shape) * static_cast<int64_t>(sizeof(float))});
  }
  auto whole = [&](int i, int shard) {
    return VariablePart{i, shard, 0, NumElements(variables[i].shape), variables[i].name, variables[i].shape};
  };
  std::vector<VariablePart> parts;
  if (policy != "partitioned") {
    absl::StatusOr<std::vector<int>> plan = PlaceVariables(sizes, num_shards, policy);
    if (!plan.ok()) return plan.status();
    for (size_t i = 0; i < variables.size(); ++i) parts.push_back(whole(static_cast<int>(i), (*plan)[i]));
    return parts;
  }
  if (partition_bytes <= 0) return absl::InvalidArgumentError("placement partitioned needs partition_bytes > 0");

  // Split the large variables first; their load is even across shards.
  std::vector<int64_t> load(num_shards, 0);
  std::vector<std::vector<VariablePart>> per_variable(variables.size());
  std::vector<size_t> small;
  for (size_t i = 0; i < variables.size(); ++i) {
    const int64_t n = NumElements(variables[i].shape);
    if (sizes[i].bytes <= partition_bytes || n < num_shards) {
      small.push_back(i);
      continue;
    }
    int64_t offset = 0;
    for (int p = 0; p < num_shards; ++p) {
      const int64_t count = n / num_shards + (p < n % num_shards ? 1 : 0);
      per_variable[i].push_back({static_cast<int>(i), p, offset, count,
                                 absl::StrCat(variables[i].name, "/part_", p), Shape{count}});
      load[p] += count * static_cast<int64_t>(sizeof(float));
      offset += count;
    }
  }
  // Then the rest, largest first, onto the least-loaded shard.
  std::stable_sort(small.begin(), small.end(), [&](size_t a, size_t b) { return sizes[a].bytes > sizes[b].bytes; });
  for (size_t i : small) {
    const int best = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    per_variable[i].push_back(whole(static_cast<int>(i), best));
    load[best] += sizes[i].bytes;
  }
  for (auto& v : per_variable) parts.insert(parts.end(), v.begin(), v.end());
  return parts;
}

std::vector<int64_t> ShardBytes(const std::vector<VariablePart>& parts, int num_shards) {
  std::vector<int64_t> bytes(num_shards, 0);
  for (const VariablePart& p : parts) bytes[p.shard] += p.count * static_cast<int64_t>(sizeof(float));
  return bytes;
}

std::vector<int64_t> ShardBytes(const std::vector<VariableSize>& variables, const std::vector<int>& plan,
                                int num_shards) {
  std::vector<int64_t> bytes(num_shards, 0);
  for (size_t i = 0; i < variables.size(); ++i) bytes[plan[i]] += variables[i].bytes;
  return bytes;
}

}  // namespace pstrain
