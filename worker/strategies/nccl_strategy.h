// The GPU strategies that keep variables on the device and reduce gradients
// with NCCL (worker/strategies/nccl_allreduce.cc):
//   replicated + all_reduce_spec nccl   the GPUs of one worker
//   allreduce on device gpu             every GPU of every worker (Horovod)
// Every other strategy on GPU works on pinned host mirrors (ReplicaSet).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "worker/strategy.h"

namespace pstrain {

// True when `config` runs one of the strategies above (its replicas then
// need no host mirrors).
bool UsesNccl(const ExperimentConfig& config);

// The NCCL strategy for `context`; Unimplemented in a build without CUDA.
absl::StatusOr<std::unique_ptr<Strategy>> CreateNcclStrategy(const StrategyContext& context);

}  // namespace pstrain
