// local_parameter_device gpu (parameter_server): each variable's gradient is
// summed on the replica (GPU) that owns it, chosen greedily as the least
// loaded by bytes, from peer copies of the other replicas' gradients; only
// the owner's sum crosses to the host, into replica 0's variables (what the
// PS push reads), where it is scaled to the mean.
#include <algorithm>
#include <vector>

#include "worker/local_reduce.h"

namespace pstrain {

std::vector<int> GradientOwners(ReplicaSet& replicas) {
  const std::vector<Variable>& vars = replicas.device_variables(0);
  std::vector<int> order(vars.size());
  for (size_t v = 0; v < order.size(); ++v) order[v] = static_cast<int>(v);
  // Largest first, ties by index: a deterministic greedy bin packing.
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return vars[a].grad.num_bytes() > vars[b].grad.num_bytes(); });
  std::vector<size_t> load(replicas.size(), 0);
  std::vector<int> owners(vars.size(), 0);
  for (int v : order) {
    const int owner = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owners[v] = owner;
    load[owner] += vars[v].grad.num_bytes();
  }
  return owners;
}

namespace {

// For each variable in turn: the others' gradients to its owner at once,
// then the owner's sum down to the host.
void ModelOwnerCopies(ReplicaSet& replicas, const std::vector<int>& owners, EmulatedInterconnect& interconnect) {
  const std::vector<Variable>& vars = replicas.variables(0);
  for (size_t v = 0; v < owners.size(); ++v) {
    const int64_t bytes = static_cast<int64_t>(vars[v].grad.num_bytes());
    interconnect.Transfer(OwnerCopies(replicas.size(), owners[v], bytes, /*to_owner=*/true));
    interconnect.Transfer({{owners[v], kHostEndpoint, bytes}});
  }
}

}  // namespace

void ReduceGradientsOnOwnerDevices(ReplicaSet& replicas) {
  const int n = replicas.size();
  const std::vector<int> owners = GradientOwners(replicas);
  if (EmulatedInterconnect* interconnect = replicas.interconnect())
    return ModelOwnerCopies(replicas, owners, *interconnect);
  const float scale = 1.0f / static_cast<float>(n);
  for (size_t v = 0; v < owners.size(); ++v) {
    const int o = owners[v];
    DeviceContext& owner = replicas.context(o);
    owner.MakeCurrent();
    const Tensor& sum = replicas.device_variables(o)[v].grad;
    for (int r = 0; r < n; ++r) {
      if (r == o) continue;
      Tensor peer = owner.Allocate(sum.shape());  // from the owner's cache after the first step
      owner.Convert(replicas.device_variables(r)[v].grad, peer);
      owner.Accumulate(sum, peer);
    }
    const Tensor& host = replicas.variables(0)[v].grad;
    if (host.raw() != sum.raw()) owner.Convert(sum, host);  // into a host tensor: complete on return
    owner.Synchronize();
    for (float& x : host.span()) x *= scale;
  }
  replicas.context(0).MakeCurrent();
}

namespace {

const bool kRegistered = LocalReduceRegistry().Register(
    "owner_device", {"each variable summed on the replica that owns it (local_parameter_device gpu)", false,
                     ReduceGradientsOnOwnerDevices, /*reduce_one=*/nullptr});

}  // namespace
}  // namespace pstrain
