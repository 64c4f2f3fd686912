// Builds without CUDA: the "gpu" device kind is known but unavailable, and
// every config that names it is refused with the reason.
#include "device/device_registry.h"

namespace pstrain {
namespace {

const bool kGpuUnavailable = DeviceRegistry().RegisterUnavailable(
    "gpu", "this pstrain was built without CUDA: install the CUDA toolkit and configure with -DPSTRAIN_WITH_CUDA=ON");

}  // namespace
}  // namespace pstrain
