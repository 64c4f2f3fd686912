// Placement: which PS shard holds each variable.
//
// Deterministic from (variables in model order, shard count, policy), so every
// role computes the same plan without talking.
//   round_robin: variable i -> shard i % num_shards.
//   greedy:      largest variable first onto the shard with the fewest bytes so
//                far (ties: lowest shard, then model order).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

struct VariableSize {
  std::string name;
  int64_t bytes = 0;
};

// Returns the shard of each variable, indexed like `variables`.
absl::StatusOr<std::vector<int>> PlaceVariables(const std::vector<VariableSize>& variables, int num_shards,
                                                const std::string& policy);

// Bytes per shard under `plan`.
std::vector<int64_t> ShardBytes(const std::vector<VariableSize>& variables, const std::vector<int>& plan,
                                int num_shards);

}  // namespace pstrain
