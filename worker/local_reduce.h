// In-worker gradient reduction across the replicas of one process
// (tf_cnn_benchmarks' all_reduce_spec for variable_update replicated).
//
// Both algorithms leave the MEAN gradient over the replicas in every
// replica's grad tensors; they differ in where the sum is formed:
//   "pscpu": every gradient is gathered into a host buffer, summed there and
//            copied back (local_reduce_pscpu.cc);
//   "none":  each variable's gradients are summed on one replica chosen
//            round-robin by variable index, then copied back to the others
//            (local_reduce_copy.cc).
// ("nccl" is the GPU all-reduce; on CPU-only builds it is refused at config
// time.)
#pragma once

#include <string>

#include "absl/status/status.h"
#include "worker/replica_set.h"

namespace pstrain {

void ReduceGradientsOnHost(ReplicaSet& replicas);
void ReduceGradientsByCopy(ReplicaSet& replicas);
// Dispatches on the spec name; "" means "pscpu".
absl::Status ReduceGradients(const std::string& all_reduce_spec, ReplicaSet& replicas);

}  // namespace pstrain
