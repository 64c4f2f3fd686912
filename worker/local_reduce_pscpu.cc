// pscpu: gather every replica's gradient into a host buffer, sum, scale,
// copy back to every replica.
#include <vector>

#include "worker/local_reduce.h"

namespace pstrain {

void ReduceGradientsOnHost(ReplicaSet& replicas) {
  const int n = replicas.size();
  if (n == 1) return;
  if (EmulatedInterconnect* interconnect = replicas.interconnect()) {
    // The gradients came down with TrainStep; the sum reads them all and
    // writes one (the next step's uploads take it back).
    const int64_t bytes = GradientBytes(replicas);
    interconnect->HostPass(n * bytes, bytes);
    return;
  }
  const float scale = 1.0f / static_cast<float>(n);
  const size_t num_vars = replicas.variables(0).size();
  std::vector<float> host;
  for (size_t v = 0; v < num_vars; ++v) {
    const Tensor& first = replicas.variables(0)[v].grad;
    host.assign(first.data(), first.data() + first.num_elements());
    for (int r = 1; r < n; ++r) {
      const float* g = replicas.variables(r)[v].grad.data();
      for (size_t i = 0; i < host.size(); ++i) host[i] += g[i];
    }
    for (float& x : host) x *= scale;
    for (int r = 0; r < n; ++r) {
      std::copy(host.begin(), host.end(), replicas.variables(r)[v].grad.data());
    }
  }
}

namespace {

const bool kRegistered =
    LocalReduceRegistry().Register("pscpu", {"every gradient gathered on the host, summed there, copied back", true,
                                             ReduceGradientsOnHost, /*reduce_one=*/nullptr});

}  // namespace
}  // namespace pstrain
