#include "worker/collective/collective.h"

namespace pstrain {

Registry<CollectiveEntry>& CollectiveRegistry() {
  static auto* registry = new Registry<CollectiveEntry>("collective");
  return *registry;
}

namespace {

// The libraries a build may lack say so, by name.
#ifndef PSTRAIN_WITH_MPI
const bool kNoMpi = CollectiveRegistry().RegisterUnavailable(
    "mpi", "this pstrain was built without Open MPI: install libopenmpi-dev and configure with -DPSTRAIN_WITH_MPI=ON");
#endif
#ifndef PSTRAIN_WITH_CUDA
const bool kNoNccl = CollectiveRegistry().RegisterUnavailable(
    "nccl", "this pstrain was built without CUDA (PSTRAIN_WITH_CUDA=OFF); NCCL reduces GPU buffers");
#endif

}  // namespace
}  // namespace pstrain
