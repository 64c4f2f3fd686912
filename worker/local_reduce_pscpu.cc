// pscpu: every replica's gradient of a variable summed in host memory,
// scaled, copied back to every replica; variable by variable, each as soon
// as every replica's gradient of it is final (OverlappedReduce), so the sums
// run while backward goes on.
#include <vector>

#include "worker/local_reduce.h"

namespace pstrain {

void ReduceGradientOnHost(ReplicaSet& replicas, int variable) {
  const int n = replicas.size();
  if (n == 1) return;
  if (EmulatedInterconnect* interconnect = replicas.interconnect()) {
    // The gradient came down with TrainStep; the sum reads every replica's
    // and writes one (the next step's uploads take it back).
    const int64_t bytes = static_cast<int64_t>(replicas.variables(0)[variable].grad.num_bytes());
    interconnect->HostPass(n * bytes, bytes);
    return;
  }
  // Summed into replica 0's host gradient (a host mirror on GPUs) in replica
  // order, scaled, copied to the others.
  const float scale = 1.0f / static_cast<float>(n);
  Tensor& sum = replicas.variables(0)[variable].grad;
  float* s = sum.data();
  const int64_t count = sum.num_elements();
  for (int r = 1; r < n; ++r) {
    const float* g = replicas.variables(r)[variable].grad.data();
    for (int64_t i = 0; i < count; ++i) s[i] += g[i];
  }
  for (int64_t i = 0; i < count; ++i) s[i] *= scale;
  for (int r = 1; r < n; ++r) replicas.variables(r)[variable].grad.CopyFrom(sum);
}

namespace {

const bool kRegistered =
    LocalReduceRegistry().Register("pscpu", {"every gradient gathered on the host, summed there, copied back", true,
                                             /*reduce=*/nullptr, ReduceGradientOnHost});

}  // namespace
}  // namespace pstrain
