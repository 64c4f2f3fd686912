// absl's lock-order checking in the processes that train.
//
// absl::Mutex can record every acquisition in a global graph of "held while
// acquiring" edges and report a cycle (a deadlock waiting to happen). The
// check is compiled in wherever absl itself was built without NDEBUG, as
// Debian's is, and is then on by default: every lock, in pstrain and in
// gRPC, takes the graph's global lock and may capture a stack trace. Tests
// keep it on (tests/util/test_main.cc); the role and bench binaries turn it
// off with this, unless PSTRAIN_CHECK_LOCK_ORDER=1 asks for it (a cycle is
// then logged, not fatal). Call once, early in main(), before any thread.
#pragma once

namespace pstrain {

// Returns whether the check stays on (PSTRAIN_CHECK_LOCK_ORDER=1).
bool SetLockOrderCheckingFromEnvironment();

}  // namespace pstrain
