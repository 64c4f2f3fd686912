// ThreadRole: "only this thread" as a capability for clang's thread-safety
// analysis (-Wthread-safety), for state that one thread owns rather than a
// mutex guards (a progress thread, a communication thread).
//
// State only that thread touches is ABSL_GUARDED_BY(role) and functions that
// run only there are ABSL_EXCLUSIVE_LOCKS_REQUIRED(role), so a path from
// another thread to them does not compile. The thread holds the role for its
// whole life (Enter() first, Leave() last); code that reaches the thread by
// other ways the analysis cannot follow (callbacks a library invokes on it,
// tasks queued for it) starts with AssertHeld(), which also checks the thread
// at run time.
//
// Unlike a mutex, a role excludes nothing: it only states, and checks, which
// thread is running.
#pragma once

#include <atomic>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "glog/logging.h"

namespace pstrain {

class ABSL_LOCKABLE ThreadRole {
 public:
  // `name` names the thread in the failure of AssertHeld ("the ucx progress
  // thread"); a string literal (it is kept, not copied).
  explicit ThreadRole(const char* name) : name_(name) {}
  ThreadRole(const ThreadRole&) = delete;
  ThreadRole& operator=(const ThreadRole&) = delete;

  // The calling thread takes the role (until Leave).
  void Enter() ABSL_EXCLUSIVE_LOCK_FUNCTION() { owner_.store(std::this_thread::get_id()); }
  void Leave() ABSL_UNLOCK_FUNCTION() { owner_.store(std::thread::id()); }

  // CHECKs that the calling thread holds the role; for the analysis, it does
  // from here on.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {
    CHECK(owner_.load() == std::this_thread::get_id()) << "state of " << name_ << " touched off that thread";
  }

 private:
  const char* const name_;
  std::atomic<std::thread::id> owner_{};
};

}  // namespace pstrain
