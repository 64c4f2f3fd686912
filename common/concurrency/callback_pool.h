// CallbackPool: runs callbacks (handlers, call completions) on a few threads
// of its own, so that the thread that produces them (a transport's progress
// thread) never runs user code, and a slow callback delays only other
// callbacks, never that thread.
#pragma once

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {

// Run() may be called from any thread; the callbacks run in the order they
// were queued, each on whichever pool thread is free (so several at once).
// After Stop() Run() runs the callback on the calling thread. Stop() runs
// everything queued before it returns. Thread-safe.
class CallbackPool {
 public:
  using Task = absl::AnyInvocable<void()>;

  // Starts `threads` threads.
  explicit CallbackPool(int threads);
  // Stop().
  ~CallbackPool();
  CallbackPool(const CallbackPool&) = delete;
  CallbackPool& operator=(const CallbackPool&) = delete;

  void Run(Task task) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs what is queued, then joins the threads. Idempotent. Never from one
  // of the pool's own threads.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Work() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  absl::CondVar ready_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace pstrain
