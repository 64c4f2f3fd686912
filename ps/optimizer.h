// Optimizer: how a PS shard turns an averaged gradient into a new value.
//
// Optimizers are registered by name ("sgd", "momentum"); each lives in its own
// file under ps/optimizers/. Apply() is called with the variable's lock held;
// it reads `old_value` and writes `new_value` (the PS passes distinct buffers
// because readers may still be sending the old one; in-place updates with
// old_value == new_value must also work), updating the optimizer's
// per-variable slot arrays in place. Every optimizer is elementwise, so a
// variable may be updated in several calls over consecutive ranges; `slots`
// then points at each slot array offset to the range.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"

namespace pstrain {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Per-variable state arrays of the variable's length (e.g. 1 for momentum).
  virtual int num_slots() const = 0;
  virtual void Apply(const float* old_value, const float* grad, int64_t n, float learning_rate,
                     float* const* slots, float* new_value) const = 0;
};

using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(const OptimizerConfig&)>;
bool RegisterOptimizer(const std::string& name, OptimizerFactory factory);
// Unknown names are NotFound listing the known ones.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerConfig& config);

// Learning rate after `applied_updates` updates of a run of `total_steps`.
float LearningRateAt(const OptimizerConfig& config, int64_t applied_updates, int64_t total_steps);

}  // namespace pstrain
