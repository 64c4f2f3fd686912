// emulated_ring: replicated with all_reduce_spec nccl on emulated devices in
// an emulated host (emulation.topology): each variable's gradient is
// all-reduced along the profile's ring, as NCCL's ring all-reduce moves it
// (EmulatedInterconnect::RingAllReduce), one variable after another in the
// order their gradients become final (tf_cnn_benchmarks' replicated nccl
// all-reduces tensor by tensor). Only over an emulated interconnect.
#include "glog/logging.h"
#include "worker/local_reduce.h"

namespace pstrain {
namespace {

void RingReduceOne(ReplicaSet& replicas, int variable) {
  EmulatedInterconnect* interconnect = replicas.interconnect();
  CHECK(interconnect != nullptr) << "emulated_ring needs emulated devices in an emulated host (emulation.topology)";
  interconnect->RingAllReduce(static_cast<int64_t>(replicas.variables(0)[variable].grad.num_bytes()));
}

const bool kRegistered = LocalReduceRegistry().Register(
    "emulated_ring", {"each variable all-reduced along the emulated host's device ring (replicated nccl on emulated "
                      "devices)",
                      false, /*reduce=*/nullptr, RingReduceOne});

}  // namespace
}  // namespace pstrain
