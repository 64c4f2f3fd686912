#include "common/transport/ucx/process_settings.h"

#include <ucm/api/ucm.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include "absl/base/config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/environment.h"
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

namespace {

// Whether UCX_RNDV_SCHEME was the user's (set before SetProcessDefaults).
std::atomic<bool> user_rndv_scheme{false};

}  // namespace

void SetProcessDefaults() {
  static const bool done = [] {
    user_rndv_scheme = std::getenv("UCX_RNDV_SCHEME") != nullptr;
    setenv("UCX_MM_ERROR_HANDLING", "y", /*overwrite=*/0);
    setenv("UCX_RNDV_SCHEME", "get_zcopy", /*overwrite=*/0);
    setenv("UCX_TCP_CM_REUSEADDR", "y", /*overwrite=*/0);
    // Both or neither: UCX refuses a send segment larger than the receive one.
    if (std::getenv("UCX_TCP_TX_SEG_SIZE") == nullptr && std::getenv("UCX_TCP_RX_SEG_SIZE") == nullptr) {
      setenv("UCX_TCP_TX_SEG_SIZE", kTcpSegmentSize, /*overwrite=*/0);
      setenv("UCX_TCP_RX_SEG_SIZE", kTcpSegmentSize, /*overwrite=*/0);
    }
    return true;
  }();
  (void)done;
}

std::string NetworkRendezvousScheme() { return user_rndv_scheme ? "" : "put_zcopy"; }

std::string TransportsWithoutSharedMemory(const char* user_tls) {
  // UCX 1.13's names of its shared-memory transports, and its aliases for them.
  constexpr absl::string_view kSharedMemory[] = {"sm", "shm", "mm", "posix", "sysv", "xpmem", "cma", "knem"};
  const std::string tls = absl::AsciiStrToLower(absl::StripAsciiWhitespace(user_tls == nullptr ? "" : user_tls));
  if (tls.empty() || tls == "all") return "^sm";
  // An entry may carry a suffix (":aux"); the name is what comes before it.
  auto name = [](absl::string_view entry) { return std::string(entry.substr(0, entry.find(':'))); };
  if (tls[0] == '^') {
    for (absl::string_view entry : absl::StrSplit(tls.substr(1), ',')) {
      if (name(entry) == "sm" || name(entry) == "shm") return "";  // excluded already
    }
    return tls + ",sm";
  }
  std::vector<std::string> kept;
  bool dropped = false;
  for (absl::string_view entry : absl::StrSplit(tls, ',', absl::SkipEmpty())) {
    if (std::find(std::begin(kSharedMemory), std::end(kSharedMemory), name(entry)) != std::end(kSharedMemory)) {
      dropped = true;
    } else {
      kept.emplace_back(entry);
    }
  }
  if (!dropped || kept.empty()) return "";
  return absl::StrJoin(kept, ",");
}

absl::Duration SpinFromEnvironment() {
  return absl::Microseconds(std::max<int64_t>(IntFromEnvironment("PSTRAIN_UCX_SPIN_US", 200, "microseconds"), 0));
}

bool ReceiveInPlaceFromEnvironment() {
  static const bool in_place = IntFromEnvironment("PSTRAIN_UCX_RECEIVE_IN_PLACE", 1, "0 or 1") != 0;
  return in_place;
}

}  // namespace pstrain::ucx
