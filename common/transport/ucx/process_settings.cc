#include "common/transport/ucx/process_settings.h"

#include <ucm/api/ucm.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "absl/base/config.h"
#include "absl/strings/numbers.h"
#include "glog/logging.h"

namespace pstrain::ucx {

absl::Status CheckMemoryHooksForSanitizers() {
#if defined(ABSL_HAVE_ADDRESS_SANITIZER) || defined(ABSL_HAVE_THREAD_SANITIZER)
  if (ucm_global_opts.mmap_hook_mode != UCM_MMAP_HOOK_NONE && ucm_global_opts.enable_events) {
    return absl::FailedPreconditionError(
        "ucx: UCX's memory hooks crash under AddressSanitizer and ThreadSanitizer: start this sanitizer build "
        "with UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no in the environment");
  }
#endif
  return absl::OkStatus();
}

void SetProcessDefaults() {
  static const bool done = [] {
    setenv("UCX_MM_ERROR_HANDLING", "y", /*overwrite=*/0);
    setenv("UCX_RNDV_SCHEME", "get_zcopy", /*overwrite=*/0);
    setenv("UCX_TCP_CM_REUSEADDR", "y", /*overwrite=*/0);
    return true;
  }();
  (void)done;
}

absl::Duration SpinFromEnvironment() {
  const char* value = std::getenv("PSTRAIN_UCX_SPIN_US");
  int64_t us = 200;
  if (value != nullptr && !absl::SimpleAtoi(value, &us)) {
    LOG(WARNING) << "ucx: ignoring PSTRAIN_UCX_SPIN_US='" << value << "' (not a number of microseconds)";
    us = 200;
  }
  return absl::Microseconds(std::max<int64_t>(us, 0));
}

}  // namespace pstrain::ucx
