#include "common/placement.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/registry.h"

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
      absl::StrCat("placement '", policy, "' does not place whole variables; those that do: round_robin, greedy"));
}

namespace {

constexpr char kPartSuffix[] = "/part_";

// A policy: the parts of every variable, in model order.
using PartPlanner = std::function<absl::StatusOr<std::vector<VariablePart>>(const std::vector<VariableShape>& variables,
                                                                            int num_shards, int64_t partition_bytes)>;

int64_t BytesOf(const VariableShape& v) { return NumElements(v.shape) * static_cast<int64_t>(sizeof(float)); }

VariablePart Whole(const std::vector<VariableShape>& variables, int i, int shard) {
  return VariablePart{i, shard, 0, NumElements(variables[i].shape), variables[i].name, variables[i].shape};
}

// round_robin and greedy: whole variables, by PlaceVariables.
PartPlanner WholeVariables(const std::string& policy) {
  return [policy](const std::vector<VariableShape>& variables, int num_shards,
                  int64_t) -> absl::StatusOr<std::vector<VariablePart>> {
    std::vector<VariableSize> sizes;
    for (const VariableShape& v : variables) sizes.push_back({v.name, BytesOf(v)});
    absl::StatusOr<std::vector<int>> plan = PlaceVariables(sizes, num_shards, policy);
    if (!plan.ok()) return plan.status();
    std::vector<VariablePart> parts;
    for (size_t i = 0; i < variables.size(); ++i) parts.push_back(Whole(variables, static_cast<int>(i), (*plan)[i]));
    return parts;
  };
}

absl::StatusOr<std::vector<VariablePart>> Partitioned(const std::vector<VariableShape>& variables, int num_shards,
                                                      int64_t partition_bytes) {
  if (partition_bytes <= 0) return absl::InvalidArgumentError("placement partitioned needs partition_bytes > 0");
  // Split the large variables first; their load is even across shards.
  std::vector<int64_t> load(num_shards, 0);
  std::vector<std::vector<VariablePart>> per_variable(variables.size());
  std::vector<size_t> small;
  for (size_t i = 0; i < variables.size(); ++i) {
    const int64_t n = NumElements(variables[i].shape);
    if (BytesOf(variables[i]) <= partition_bytes || n < num_shards) {
      small.push_back(i);
      continue;
    }
    int64_t offset = 0;
    for (int p = 0; p < num_shards; ++p) {
      const int64_t count = n / num_shards + (p < n % num_shards ? 1 : 0);
      per_variable[i].push_back({static_cast<int>(i), p, offset, count, PartKey(variables[i].name, p), Shape{count}});
      load[p] += count * static_cast<int64_t>(sizeof(float));
      offset += count;
    }
  }
  // Then the rest, largest first, onto the least-loaded shard.
  std::stable_sort(small.begin(), small.end(),
                   [&](size_t a, size_t b) { return BytesOf(variables[a]) > BytesOf(variables[b]); });
  for (size_t i : small) {
    const int best = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    per_variable[i].push_back(Whole(variables, static_cast<int>(i), best));
    load[best] += BytesOf(variables[i]);
  }
  std::vector<VariablePart> parts;
  for (auto& v : per_variable) parts.insert(parts.end(), v.begin(), v.end());
  return parts;
}

// balanced (BytePS): every variable above partition_bytes cut into slices
// of at most partition_bytes (as equal as whole elements allow); slices and
// the small variables, largest first, each onto the least-loaded shard. No
// shard then carries more than one slice above its share, whatever the
// model (one large layer no longer lands on one shard).
absl::StatusOr<std::vector<VariablePart>> Balanced(const std::vector<VariableShape>& variables, int num_shards,
                                                   int64_t partition_bytes) {
  if (partition_bytes <= 0) return absl::InvalidArgumentError("placement balanced needs partition_bytes > 0");
  const int64_t slice_elements = std::max<int64_t>(1, partition_bytes / static_cast<int64_t>(sizeof(float)));
  std::vector<std::vector<VariablePart>> per_variable(variables.size());
  std::vector<std::pair<int, int>> pieces;  // (variable, slice)
  for (size_t i = 0; i < variables.size(); ++i) {
    const int64_t n = NumElements(variables[i].shape);
    const int64_t slices = std::max<int64_t>(1, (n + slice_elements - 1) / slice_elements);
    if (slices == 1) {
      per_variable[i].push_back(Whole(variables, static_cast<int>(i), 0));
    } else {
      int64_t offset = 0;
      for (int64_t p = 0; p < slices; ++p) {
        const int64_t count = n / slices + (p < n % slices ? 1 : 0);
        per_variable[i].push_back(
            {static_cast<int>(i), 0, offset, count, absl::StrCat(variables[i].name, "/slice_", p), Shape{count}});
        offset += count;
      }
    }
    for (size_t p = 0; p < per_variable[i].size(); ++p) pieces.emplace_back(static_cast<int>(i), static_cast<int>(p));
  }
  std::stable_sort(pieces.begin(), pieces.end(), [&](const auto& a, const auto& b) {
    return per_variable[a.first][a.second].count > per_variable[b.first][b.second].count;
  });
  std::vector<int64_t> load(num_shards, 0);
  for (const auto& [v, p] : pieces) {
    VariablePart& part = per_variable[v][p];
    part.shard = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    load[part.shard] += part.count * static_cast<int64_t>(sizeof(float));
  }
  std::vector<VariablePart> parts;
  for (auto& v : per_variable) parts.insert(parts.end(), v.begin(), v.end());
  return parts;
}

Registry<PartPlanner>& Planners() {
  static auto* registry = [] {
    auto* r = new Registry<PartPlanner>("placement");
    r->Register("round_robin", WholeVariables("round_robin"));
    r->Register("greedy", WholeVariables("greedy"));
    r->Register("partitioned", Partitioned);
    r->Register("balanced", Balanced);
    return r;
  }();
  return *registry;
}

}  // namespace

std::vector<std::string> PlacementPolicies() { return Planners().Names(); }

int64_t AutoPartitionBytes(const std::vector<VariableShape>& variables, int num_shards) {
  if (num_shards <= 1) return kLargestAutoPartition;
  int64_t total = 0;
  for (const VariableShape& v : variables) total += BytesOf(v);
  return std::clamp(total / (4 * int64_t{num_shards}), kSmallestAutoPartition, kLargestAutoPartition);
}

absl::StatusOr<std::vector<VariablePart>> PlanPlacement(const std::vector<VariableShape>& variables, int num_shards,
                                                        const std::string& policy, int64_t partition_bytes) {
  if (num_shards <= 0) return absl::InvalidArgumentError(absl::StrCat("placement: ", num_shards, " shards"));
  absl::StatusOr<PartPlanner> planner = Planners().Find(policy);
  if (!planner.ok()) return absl::InvalidArgumentError(planner.status().message());
  if (partition_bytes == 0) partition_bytes = AutoPartitionBytes(variables, num_shards);
  return (*planner)(variables, num_shards, partition_bytes);
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

std::string PartKey(const std::string& name, int index) { return absl::StrCat(name, kPartSuffix, index); }

std::string PartVariable(const std::string& key, int* part_index) {
  const size_t at = key.rfind(kPartSuffix);
  int index = 0;
  if (at == std::string::npos || !absl::SimpleAtoi(key.substr(at + sizeof(kPartSuffix) - 1), &index)) {
    if (part_index != nullptr) *part_index = 0;
    return key;
  }
  if (part_index != nullptr) *part_index = index;
  return key.substr(0, at);
}

}  // namespace pstrain
