// TimedCopyEngine: the CopyEngine (device/copy_engine.h) of an emulated
// device whose memory is the host's but whose copies take time, as a GPU's
// do over PCIe: each copy takes `latency` plus its bytes at `gbps` and then
// moves the bytes (memcpy). Downloads run one at a time on a lane (thread)
// of their own, in the order queued, overlapping the caller's compute;
// uploads on another lane. A CPU context computes on the caller's thread,
// which cannot wait for an event the way a GPU stream does, so Upload
// returns once its copy is complete (the upload lane serves one at a time).
//
// Every copy is recorded (copies()), so tests can check what the pipeline of
// GPU replicas promises: downloads in the order backward finalises the
// gradients, each `done` after its copy, uploads before the compute that
// reads them. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "device/copy_engine.h"

namespace pstrain {

class TimedCopyEngine final : public CopyEngine {
 public:
  struct Options {
    double gbps = 100;  // gigabits per second, each direction
    absl::Duration latency = absl::Microseconds(10);
  };
  enum class Direction { kDownload, kUpload };
  struct Copy {
    Direction direction;
    const void* dst;  // the destination's bytes
    int64_t bytes;
    absl::Time queued, started, finished;
  };

  explicit TimedCopyEngine(Options options);
  ~TimedCopyEngine() override;  // drains first

  void Download(const Tensor& src, const Tensor& dst, std::function<void()> done) override;
  void Upload(const Tensor& src, const Tensor& dst) override;
  void Drain() override;

  // Every copy finished so far, in the order each lane finished them.
  std::vector<Copy> copies() const;

 private:
  struct Job {
    Copy copy;
    const void* src;
    void* dst;
    std::function<void()> done;  // may be null
  };
  // One lane: a thread that makes its queue's copies one at a time.
  struct Lane {
    std::deque<Job> queue;
    bool busy = false;
    std::thread thread;
  };
  void Enqueue(Lane& lane, Direction direction, const Tensor& src, const Tensor& dst, std::function<void()> done);
  void Serve(Lane& lane);
  // Waits until `lane` has nothing queued or in progress.
  void WaitIdle(Lane& lane, std::unique_lock<std::mutex>& lock);

  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool stopping_ = false;
  Lane downloads_;
  Lane uploads_;
  std::vector<Copy> finished_;
};

}  // namespace pstrain
