#include "common/concurrency/callback_pool.h"

#include <utility>

namespace pstrain {

CallbackPool::CallbackPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

CallbackPool::~CallbackPool() { Stop(); }

void CallbackPool::Run(Task task) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopped_) {
      queue_.push_back(std::move(task));
      ready_.Signal();
      return;
    }
  }
  task();
}

void CallbackPool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    ready_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
}

void CallbackPool::Work() {
  for (;;) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      while (queue_.empty() && !stopped_) ready_.Wait(&mu_);
      if (queue_.empty()) return;  // stopped and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace pstrain
