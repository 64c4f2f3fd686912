// Optimizer: how an averaged gradient turns into a variable's new value.
//
// One file per optimizer and device: optim/<name>.cc on the CPU (what the
// parameter servers and the workers' local optimizers run) and, in CUDA
// builds, optim/cuda/<name>.cc (what the NCCL strategies run on the GPUs);
// each registers itself in the registry of its device kind. Every optimizer
// has a CPU implementation; a CUDA one is optional (a GPU strategy asks for
// it and says so when it is missing).
//
// Apply() reads `old_value` and the gradient, scaled by the step's
// `gradient_scale` (the mean of a sum costs no extra pass over memory), and
// writes `new_value` (distinct buffers on a PS,
// whose readers may still be sending the old one; the same buffer for
// in-place updates, which must work too), updating the optimizer's
// per-variable slot arrays in place. Every optimizer is elementwise, so a
// variable may be updated in several calls over consecutive ranges; `slots`
// then points at each slot array offset to the range. On a CUDA optimizer
// every pointer is device memory (the `slots` array itself is on the host)
// and Apply() queues the work on the optimizer's stream and returns at once.
//
// ApplyAll() updates many variables in place with one step: the same result
// as Apply() on each in turn. A CUDA optimizer does it with one kernel
// launch for all of them (tensor_chunks.h); the default loops over Apply().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/registry.h"
#include "common/tensor.h"
#include "proto/config.pb.h"

namespace pstrain {

// The step-wide inputs of one update.
struct OptimizerStep {
  float learning_rate = 0;
  // The gradient used is gradient_scale * grad (e.g. 1/N for the mean of N
  // summed gradients).
  float gradient_scale = 1;
  // Updates the variable (or, on an embedding table, the row) has had
  // before this one; optimizers with bias correction (adam) use it.
  int64_t updates_before = 0;
};

// One variable of an in-place ApplyAll(): its value (updated in place),
// gradient, length and slot arrays (num_slots() of them, on the host as in
// Apply()).
struct VariableUpdate {
  float* value = nullptr;
  const float* grad = nullptr;
  int64_t n = 0;
  float* const* slots = nullptr;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Per-variable state arrays of the variable's length (e.g. 1 for momentum),
  // zero-initialised by the caller.
  virtual int num_slots() const = 0;
  virtual void Apply(const float* old_value, const float* grad, int64_t n, const OptimizerStep& step,
                     float* const* slots, float* new_value) const = 0;
  virtual void ApplyAll(absl::Span<const VariableUpdate> variables, const OptimizerStep& step) const {
    for (const VariableUpdate& v : variables) Apply(v.value, v.grad, v.n, step, v.slots, v.value);
  }
};

// Where a device optimizer queues its work: a cudaStream_t for
// DeviceKind::kCuda; null on the CPU.
using DeviceStream = void*;

using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(const OptimizerConfig& config, DeviceStream stream)>;

// The optimizers of one device kind, by optimizer.name.
Registry<OptimizerFactory>& OptimizerRegistry(DeviceKind kind);

// config.name()'s optimizer for `kind`; NotFound listing the known ones.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerConfig& config,
                                                           DeviceKind kind = DeviceKind::kCpu,
                                                           DeviceStream stream = nullptr);

}  // namespace pstrain
