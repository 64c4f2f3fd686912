// An emulated device's copies that take time (TimedCopyEngine,
// timed_copy_engine.h).
#include "device/timed_copy_engine.h"

#include <cstring>

#include "glog/logging.h"

namespace pstrain {

TimedCopyEngine::TimedCopyEngine(Options options) : options_(options) {
  CHECK_GT(options_.gbps, 0) << "TimedCopyEngine: gbps must be positive";
  downloads_.thread = std::thread([this] { Serve(downloads_); });
  uploads_.thread = std::thread([this] { Serve(uploads_); });
}

TimedCopyEngine::~TimedCopyEngine() {
  Drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  downloads_.thread.join();
  uploads_.thread.join();
}

void TimedCopyEngine::Download(const Tensor& src, const Tensor& dst, std::function<void()> done) {
  Enqueue(downloads_, Direction::kDownload, src, dst, std::move(done));
}

void TimedCopyEngine::Upload(const Tensor& src, const Tensor& dst) {
  Enqueue(uploads_, Direction::kUpload, src, dst, nullptr);
  std::unique_lock<std::mutex> lock(mu_);
  WaitIdle(uploads_, lock);  // the caller computes next (see the header)
}

void TimedCopyEngine::Enqueue(Lane& lane, Direction direction, const Tensor& src, const Tensor& dst,
                              std::function<void()> done) {
  CHECK(src.is_plain() && dst.is_plain() && src.num_bytes() == dst.num_bytes())
      << "TimedCopyEngine copies plain tensors of equal bytes";
  Job job{{direction, dst.raw(), static_cast<int64_t>(src.num_bytes()), absl::Now(), {}, {}},
          src.raw(),
          dst.raw(),
          std::move(done)};
  {
    std::lock_guard<std::mutex> lock(mu_);
    lane.queue.push_back(std::move(job));
  }
  changed_.notify_all();
}

void TimedCopyEngine::Serve(Lane& lane) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !lane.queue.empty(); });
    if (lane.queue.empty()) return;  // stopping, nothing left
    Job job = std::move(lane.queue.front());
    lane.queue.pop_front();
    lane.busy = true;
    lock.unlock();
    job.copy.started = absl::Now();
    const double seconds = static_cast<double>(job.copy.bytes) * 8 / (options_.gbps * 1e9);
    absl::SleepFor(options_.latency + absl::Seconds(seconds));
    if (job.copy.bytes > 0) std::memcpy(job.dst, job.src, static_cast<size_t>(job.copy.bytes));
    job.copy.finished = absl::Now();
    if (job.done) job.done();
    lock.lock();
    finished_.push_back(job.copy);
    lane.busy = false;
    changed_.notify_all();
  }
}

void TimedCopyEngine::WaitIdle(Lane& lane, std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return lane.queue.empty() && !lane.busy; });
}

void TimedCopyEngine::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  WaitIdle(downloads_, lock);
  WaitIdle(uploads_, lock);
}

std::vector<TimedCopyEngine::Copy> TimedCopyEngine::copies() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

}  // namespace pstrain
