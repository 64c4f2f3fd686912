// The CUDA context's copies (device/cuda/cuda_context.h): uploads from
// pageable host memory through pinned staging (upload_staging.h). Needs a
// GPU; skips, saying why, without one.
#include "device/cuda/cuda_context.h"

#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <thread>

#include "gtest/gtest.h"

namespace pstrain::cuda {
namespace {

class CudaContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ctx = CudaContext::Create(0);
    if (!ctx.ok()) GTEST_SKIP() << ctx.status();
    ctx_ = std::move(*ctx);
  }
  std::unique_ptr<CudaContext> ctx_;
};

// Holds the stream for 300 ms: work queued after it cannot run before.
void CUDART_CB HoldTheStream(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

Tensor Filled(int64_t n, float first) {
  Tensor t({n});
  for (int64_t i = 0; i < n; ++i) t.data()[i] = first + static_cast<float>(i);
  return t;
}

// Two uploads from pageable memory return while the stream is still busy
// with earlier work, their sources may be overwritten at once, and the
// device still gets the bytes as they were.
TEST_F(CudaContextTest, UploadsFromPageableMemoryDoNotWaitForTheStream) {
  constexpr int64_t kN = 1 << 20;
  const Tensor first = Filled(kN, 1), second = Filled(kN, -7);
  const Tensor a = ctx_->Allocate({kN}), b = ctx_->Allocate({kN});
  ctx_->Synchronize();
  ASSERT_EQ(cudaLaunchHostFunc(ctx_->stream(), HoldTheStream, nullptr), cudaSuccess);
  Tensor source_a = first.Clone(), source_b = second.Clone();
  ctx_->Convert(source_a, a);
  ctx_->Convert(source_b, b);
  EXPECT_EQ(cudaStreamQuery(ctx_->stream()), cudaErrorNotReady) << "an upload waited for the stream";
  source_a.SetZero();
  source_b.SetZero();
  Tensor back_a({kN}), back_b({kN});
  ctx_->Convert(a, back_a);
  ctx_->Convert(b, back_b);
  for (int64_t i = 0; i < kN; i += 4099) {
    ASSERT_EQ(back_a.data()[i], first.data()[i]) << i;
    ASSERT_EQ(back_b.data()[i], second.data()[i]) << i;
  }
}

// Many uploads in turn through the two staging buffers, each into its own
// tensor, every one arriving intact.
TEST_F(CudaContextTest, UploadsInTurnEachArriveIntact) {
  constexpr int kUploads = 7;
  std::vector<Tensor> device;
  Tensor source({4096});
  for (int u = 0; u < kUploads; ++u) {
    for (int64_t i = 0; i < source.num_elements(); ++i) source.data()[i] = static_cast<float>(u * 10000 + i);
    device.push_back(ctx_->Allocate(source.shape()));
    ctx_->Convert(source, device.back());
  }
  for (int u = 0; u < kUploads; ++u) {
    Tensor back(source.shape());
    ctx_->Convert(device[u], back);
    EXPECT_EQ(back.data()[5], static_cast<float>(u * 10000 + 5)) << "upload " << u;
    EXPECT_EQ(back.data()[4095], static_cast<float>(u * 10000 + 4095)) << "upload " << u;
  }
}

TEST(PageableHostMemoryTest, TellsPinnedFromPageable) {
  auto ctx = CudaContext::Create(0);
  if (!ctx.ok()) GTEST_SKIP() << ctx.status();
  const Tensor pageable({16});
  const Tensor pinned = (*ctx)->AllocateHost({16});
  EXPECT_TRUE(IsPageableHostMemory(pageable.raw()));
  EXPECT_FALSE(IsPageableHostMemory(pinned.raw()));
}

}  // namespace
}  // namespace pstrain::cuda
