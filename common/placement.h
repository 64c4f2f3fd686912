// Placement: which PS shard holds each variable (or each part of one).
//
// Deterministic from (variables in model order, shard count, policy), so every
// role computes the same plan without talking.
//   round_robin: variable i -> shard i % num_shards.
//   greedy:      largest variable first onto the shard with the fewest bytes so
//                far (ties: lowest shard, then model order).
//   partitioned: variables above partition_bytes are split into num_shards
//                contiguous parts, part i on shard i; the rest are placed
//                greedily on top of that load (ps-lite style).
//   balanced:    variables above partition_bytes are cut into slices of at
//                most partition_bytes, and every slice and small variable,
//                largest first, goes onto the least-loaded shard (BytePS):
//                no shard carries more than one slice above its share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"

namespace pstrain {

struct VariableSize {
  std::string name;
  int64_t bytes = 0;
};

// Returns the shard of each variable, indexed like `variables`.
absl::StatusOr<std::vector<int>> PlaceVariables(const std::vector<VariableSize>& variables, int num_shards,
                                                const std::string& policy);

// One PS key: a whole variable, or a contiguous slice of a partitioned one.
struct VariablePart {
  int variable = 0;  // index into the model's variables
  int shard = 0;
  int64_t offset = 0;  // first element of the variable in this part
  int64_t count = 0;   // elements
  std::string name;    // the PS key: the variable's name, or "<name>/part_<i>"
  Shape shape;         // the variable's shape, or [count] for a part
};

// The PS key of part `index` of variable `name`: "<name>/part_<index>".
std::string PartKey(const std::string& name, int index);
// The variable a PS key belongs to ("<name>/part_<i>" -> "<name>"; a whole
// variable's key is its name), and which part it is (0 for a whole one).
std::string PartVariable(const std::string& key, int* part_index = nullptr);

struct VariableShape {
  std::string name;
  Shape shape;  // float32 elements
};

// The policies PlanPlacement knows (config validation's allowed values).
std::vector<std::string> PlacementPolicies();

// partition_bytes 0 (the config's default): a quarter of each shard's share
// of the model's bytes, within [64 KiB, 8 MiB] (8 MiB with one shard), so
// a small model's one large layer is cut too and the shards' loads stay
// within a slice of each other.
inline constexpr int64_t kSmallestAutoPartition = int64_t{64} << 10;
inline constexpr int64_t kLargestAutoPartition = int64_t{8} << 20;
int64_t AutoPartitionBytes(const std::vector<VariableShape>& variables, int num_shards);

// The parts of every variable, in model order (a partitioned variable's parts
// in offset order). policy: one of PlacementPolicies(); partition_bytes > 0,
// or 0 for AutoPartitionBytes.
absl::StatusOr<std::vector<VariablePart>> PlanPlacement(const std::vector<VariableShape>& variables, int num_shards,
                                                        const std::string& policy, int64_t partition_bytes);

// Bytes per shard under a part plan.
std::vector<int64_t> ShardBytes(const std::vector<VariablePart>& parts, int num_shards);

// Bytes per shard under `plan`.
std::vector<int64_t> ShardBytes(const std::vector<VariableSize>& variables, const std::vector<int>& plan,
                                int num_shards);

}  // namespace pstrain
