// TimedCopyEngine (device/timed_copy_engine.h), the copies of an emulated
// device that take time: downloads return at once and complete in the order
// queued, each `done` once its bytes are there; an upload returns once its
// copy is complete; a copy takes at least its bytes at the link's rate.
#include "device/timed_copy_engine.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

Tensor Filled(int64_t n, float value) {
  Tensor t({n});
  for (int64_t i = 0; i < n; ++i) t.data()[i] = value + static_cast<float>(i);
  return t;
}

bool Equal(const Tensor& a, const Tensor& b) {
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    if (a.data()[i] != b.data()[i]) return false;
  }
  return true;
}

TEST(TimedCopyEngineTest, DownloadsCompleteInOrderEachDoneOnceItsBytesAreThere) {
  // 200 ms a copy: the caller checks nothing has completed long before.
  TimedCopyEngine engine({/*gbps=*/100, absl::Milliseconds(200)});
  const std::vector<int64_t> sizes = {1 << 16, 16, 1 << 12};
  std::vector<Tensor> src, dst;
  for (size_t k = 0; k < sizes.size(); ++k) {
    src.push_back(Filled(sizes[k], 10.0f * static_cast<float>(k + 1)));
    dst.push_back(Tensor({sizes[k]}));
  }
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<bool> held;  // whether dst held the bytes when `done` ran
  std::vector<std::thread::id> threads;
  for (size_t k = 0; k < sizes.size(); ++k) {
    engine.Download(src[k], dst[k], [&, k] {
      absl::MutexLock lock(&mu);
      order.push_back(static_cast<int>(k));
      held.push_back(Equal(src[k], dst[k]));
      threads.push_back(std::this_thread::get_id());
    });
  }
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(order.empty()) << "Download waited for its copy";
  }
  engine.Drain();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(held, (std::vector<bool>{true, true, true}));
  for (const std::thread::id& id : threads) EXPECT_NE(id, std::this_thread::get_id());
  const std::vector<TimedCopyEngine::Copy> copies = engine.copies();
  ASSERT_EQ(copies.size(), 3u);
  for (size_t k = 0; k < copies.size(); ++k) {
    EXPECT_EQ(copies[k].direction, TimedCopyEngine::Direction::kDownload);
    EXPECT_EQ(copies[k].bytes, sizes[k] * 4);
    EXPECT_EQ(copies[k].dst, dst[k].raw());
    if (k > 0) EXPECT_GE(copies[k].started, copies[k - 1].finished) << "one download at a time";
  }
}

TEST(TimedCopyEngineTest, AnUploadReturnsOnceCopiedAndTakesItsBytesAtTheRate) {
  // 4 MiB at 1 Gbit/s: at least 33.5 ms.
  TimedCopyEngine engine({/*gbps=*/1, absl::ZeroDuration()});
  const Tensor src = Filled(1 << 20, 3.0f);
  const Tensor dst({1 << 20});
  engine.Upload(src, dst);
  EXPECT_TRUE(Equal(src, dst)) << "Upload returned before its copy was complete";
  const std::vector<TimedCopyEngine::Copy> copies = engine.copies();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].direction, TimedCopyEngine::Direction::kUpload);
  EXPECT_GE(copies[0].finished - copies[0].started, absl::Seconds((4 << 20) * 8 / 1e9));
}

TEST(TimedCopyEngineTest, DrainWaitsForEveryDoneToReturn) {
  TimedCopyEngine engine({/*gbps=*/100, absl::Milliseconds(1)});
  const Tensor src = Filled(256, 1.0f);
  std::vector<Tensor> dst;
  for (int k = 0; k < 8; ++k) dst.push_back(Tensor({256}));
  std::atomic<int> returned{0};
  for (int k = 0; k < 8; ++k) {
    engine.Download(src, dst[k], [&returned] {
      absl::SleepFor(absl::Milliseconds(5));
      ++returned;
    });
  }
  engine.Drain();
  EXPECT_EQ(returned.load(), 8);
  for (const Tensor& d : dst) EXPECT_TRUE(Equal(src, d));
}

TEST(ImmediateCopyEngineTest, CopiesAtOnceOnTheCallersThread) {
  absl::StatusOr<std::unique_ptr<DeviceContext>> context = CreateDeviceContext(Device::Cpu());
  ASSERT_TRUE(context.ok()) << context.status();
  std::unique_ptr<CopyEngine> engine = (*context)->NewCopyEngine();
  const Tensor src = Filled(100, 7.0f);
  const Tensor dst({100});
  bool done = false;
  engine->Download(src, dst, [&done] { done = true; });
  EXPECT_TRUE(done);
  EXPECT_TRUE(Equal(src, dst));
  const Tensor back({100});
  engine->Upload(dst, back);
  EXPECT_TRUE(Equal(src, back));
  engine->Drain();
}

}  // namespace
}  // namespace pstrain
