#include "common/lock_order_checking.h"

#include <cstdlib>
#include <cstring>

#include "absl/synchronization/mutex.h"

namespace pstrain {

bool SetLockOrderCheckingFromEnvironment() {
  const char* wanted = std::getenv("PSTRAIN_CHECK_LOCK_ORDER");
  const bool on = wanted != nullptr && std::strcmp(wanted, "1") == 0;
  absl::SetMutexDeadlockDetectionMode(on ? absl::OnDeadlockCycle::kReport : absl::OnDeadlockCycle::kIgnore);
  return on;
}

}  // namespace pstrain
