// The role and bench binaries' setting of absl's lock-order checking
// (common/lock_order_checking.h). The mode is process-wide, so every case
// runs in a child process of its own that takes two mutexes in both orders.
#include "common/lock_order_checking.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/base/config.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ExitedWithCode;

// Takes `a` then `b`, then `b` then `a`: a cycle in absl's lock graph.
void TakeTwoMutexesInBothOrders() {
  absl::Mutex a;
  absl::Mutex b;
  {
    absl::MutexLock la(&a);
    absl::MutexLock lb(&b);
  }
  {
    absl::MutexLock lb(&b);
    absl::MutexLock la(&a);
  }
}

// Whether this absl checks lock order at all (it does where built without
// NDEBUG): the test binaries' mode, kAbort, then aborts on the cycle.
bool AbslChecksLockOrder() {
  const pid_t child = fork();
  if (child == 0) {
    freopen("/dev/null", "w", stderr);  // the probe's report is not the test's
    TakeTwoMutexesInBothOrders();
    std::_Exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

class LockOrderCheckingTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef ABSL_HAVE_THREAD_SANITIZER
    GTEST_SKIP() << "ThreadSanitizer reports the cycle itself, whatever absl's mode";
#endif
    if (!AbslChecksLockOrder()) GTEST_SKIP() << "this absl is built without its lock-order check (NDEBUG)";
  }
};

// In a child: sets PSTRAIN_CHECK_LOCK_ORDER to `value` (nullptr: unset)
// and applies it; exits 2 unless the check is then `on`, else takes a cycle
// and exits 0.
void ApplyThenTakeACycle(const char* value, bool on) {
  if (value == nullptr) {
    unsetenv("PSTRAIN_CHECK_LOCK_ORDER");
  } else {
    setenv("PSTRAIN_CHECK_LOCK_ORDER", value, 1);
  }
  if (SetLockOrderCheckingFromEnvironment() != on) std::exit(2);
  TakeTwoMutexesInBothOrders();
  std::exit(0);
}

TEST_F(LockOrderCheckingTest, OffByDefaultSoACycleIsNeitherFatalNorReported) {
  EXPECT_EXIT(ApplyThenTakeACycle(nullptr, /*on=*/false), ExitedWithCode(0), "^$");
}

TEST_F(LockOrderCheckingTest, OnWhenAskedAndThenACycleIsReportedNotFatal) {
  EXPECT_EXIT(ApplyThenTakeACycle("1", /*on=*/true), ExitedWithCode(0), "Potential Mutex deadlock");
}

TEST_F(LockOrderCheckingTest, AnyOtherValueLeavesItOff) {
  EXPECT_EXIT(ApplyThenTakeACycle("yes", /*on=*/false), ExitedWithCode(0), "^$");
}

}  // namespace
}  // namespace pstrain
