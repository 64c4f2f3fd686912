// main() of every test binary: GoogleTest, with absl's lock-order checking
// on. Every absl::Mutex acquisition is recorded in a graph of "held while
// acquiring" edges; a cycle (two code paths taking two mutexes in opposite
// orders: a deadlock waiting to happen) aborts the test with both stacks,
// even when the interleaving that deadlocks never occurs in the run. The
// lock orders the code documents (e.g. a PS shard's mutex before its
// variables', ps/shard/shard.h) are thereby checked on every test run.
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kAbort);
  ::testing::InitGoogleMock(&argc, argv);
  return RUN_ALL_TESTS();
}
