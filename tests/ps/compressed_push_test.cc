// Compressed traffic at a PS shard (config `compression`): 16-bit and top-k
// pushes are applied as the float32 gradients they encode, pulls come back
// in the 16-bit dtype asked for, the PS keeps float32 values, and the bytes
// counted are those that travelled.
#include <cstring>
#include <string>
#include <vector>

#include "common/compression/compression.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/shard/shard.h"
#include "tests/ps/ps_test_util.h"

namespace pstrain {
namespace {

using ::pstrain::ps_testing::AddTensor;
using ::pstrain::ps_testing::PsHarness;
using ::pstrain::ps_testing::PullResult;
using ::pstrain::ps_testing::SgdOptions;
using ::pstrain::ps_testing::Var;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Var kW{"w", {2, 3}, {1.0f, -2.0f, 0.5f, 4.0f, -0.25f, 8.0f}};

std::string Encoded(WireDType dtype, const std::vector<float>& values) {
  std::string bytes(values.size() * WireDTypeSize(dtype), '\0');
  EncodeFloats(dtype, values.data(), values.size(), bytes.data());
  return bytes;
}

std::vector<float> RoundTrip(WireDType dtype, const std::vector<float>& values) {
  const std::string bytes = Encoded(dtype, values);
  std::vector<float> out(values.size());
  DecodeFloats(dtype, bytes.data(), values.size(), out.data());
  return out;
}

std::vector<float> SgdStep(const std::vector<float>& w, const std::vector<float>& g, float lr) {
  std::vector<float> out(w.size());
  for (size_t i = 0; i < w.size(); ++i) out[i] = w[i] - lr * (g[i] + 0.0f * w[i]);
  return out;
}

class DensePushTest : public ::testing::TestWithParam<WireDType> {};

TEST_P(DensePushTest, AppliedAsTheGradientItEncodesWithHalfTheBytes) {
  const WireDType dtype = GetParam();
  PsHarness ps(SgdOptions(1, "sync", 0.5f));
  ASSERT_TRUE(ps.Init({kW}).ok());
  const std::vector<float> g = {0.1f, -0.2f, 0.3f, 1.0f / 3.0f, 2.5f, -7.0f};
  PushRequest header;
  header.set_worker(0);
  header.set_step(0);
  AddTensor(header.add_tensors(), "w", kW.shape, g.size() * 2, dtype);
  absl::StatusOr<PushResponse> pushed = ps.PushRaw(header, Encoded(dtype, g));
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_EQ(pushed->accepted(), 1);
  PullResult r = ps.Pull({"w"}, 1, 5000);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.values["w"], SgdStep(kW.values, RoundTrip(dtype, g), 0.5f));
  absl::StatusOr<StatsResponse> stats = ps.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->load().bytes_in(), 6 * 4 + 6 * 2) << "init (float32) plus the 16-bit push";
}

TEST_P(DensePushTest, PullInTheDTypeAskedForWhileThePsKeepsFloat32) {
  const WireDType dtype = GetParam();
  PsHarness ps(SgdOptions(1, "async", 0.5f));
  ASSERT_TRUE(ps.Init({kW}).ok());
  PullRequest request = PsHarness::PullHeader({"w"}, 0, 1000, 0);
  request.set_value_dtype(dtype);
  IncomingFrame response;
  ASSERT_TRUE(ps.Call("Pull", OutgoingFrame::FromHeader(request), &response).ok());
  PullResponse header;
  ASSERT_TRUE(response.ParseHeader(&header));
  ASSERT_EQ(header.tensors_size(), 1);
  EXPECT_EQ(header.tensors(0).dtype(), dtype);
  EXPECT_EQ(header.tensors(0).num_bytes(), 12u);
  std::string bytes(12, '\0');
  ASSERT_TRUE(response.Read(bytes.data(), bytes.size()).ok());
  std::vector<float> values(6);
  DecodeFloats(dtype, bytes.data(), 6, values.data());
  EXPECT_EQ(values, RoundTrip(dtype, kW.values));
  // The float32 value is untouched: a float32 pull still reads it exactly.
  PullResult exact = ps.Pull({"w"}, 0, 1000);
  ASSERT_TRUE(exact.status.ok());
  EXPECT_EQ(exact.values["w"], kW.values);
}

INSTANTIATE_TEST_SUITE_P(DTypes, DensePushTest, ::testing::Values(DT_FLOAT16, DT_BFLOAT16),
                         [](const auto& info) { return info.param == DT_FLOAT16 ? "fp16" : "bf16"; });

// Two workers, one sparse (top-k) and one dense push of the same sync step:
// the mean of what they encode is applied.
TEST(SparsePushTest, SyncStepAveragesASparseAndADensePush) {
  PsHarness ps(SgdOptions(2, "sync", 1.0f));
  ASSERT_TRUE(ps.Init({kW}).ok());
  PushRequest sparse;
  sparse.set_worker(0);
  sparse.set_step(0);
  AddTensor(sparse.add_tensors(), "w", kW.shape, 2 * 8);
  sparse.mutable_tensors(0)->set_sparse_count(2);
  const uint32_t indices[] = {1, 5};
  const float values[] = {4.0f, -2.0f};
  const std::string payload =
      std::string(reinterpret_cast<const char*>(indices), 8) + std::string(reinterpret_cast<const char*>(values), 8);
  ASSERT_TRUE(ps.PushRaw(sparse, payload).ok());
  const std::vector<float> dense = {2.0f, 2.0f, 2.0f, 2.0f, 2.0f, 2.0f};
  ASSERT_TRUE(ps.Push(1, 0, {{"w", kW.shape, dense}}).ok());
  PullResult r = ps.Pull({"w"}, 1, 5000);
  ASSERT_TRUE(r.status.ok()) << r.status;
  // mean = (sparse + dense) / 2 = {1, 3, 1, 1, 1, 0}
  EXPECT_THAT(r.values["w"], ElementsAre(0.0f, -5.0f, -0.5f, 3.0f, -1.25f, 8.0f));
}

TEST(SparsePushTest, DuplicateIndicesAddUp) {
  PsHarness ps(SgdOptions(1, "async", 1.0f));
  ASSERT_TRUE(ps.Init({kW}).ok());
  PushRequest sparse;
  sparse.set_worker(0);
  sparse.set_step(0);
  AddTensor(sparse.add_tensors(), "w", kW.shape, 2 * 8);
  sparse.mutable_tensors(0)->set_sparse_count(2);
  const uint32_t indices[] = {0, 0};
  const float values[] = {0.25f, 0.5f};
  ASSERT_TRUE(ps.PushRaw(sparse, std::string(reinterpret_cast<const char*>(indices), 8) +
                                     std::string(reinterpret_cast<const char*>(values), 8))
                  .ok());
  PullResult r = ps.Pull({"w"}, 1, 5000);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.values["w"][0], 0.25f);
}

TEST(CompressedPullTest, AnUnknownValueDTypeIsRefused) {
  PsHarness ps(SgdOptions(1, "async", 1.0f));
  ASSERT_TRUE(ps.Init({kW}).ok());
  PullRequest request = PsHarness::PullHeader({"w"}, 0, 1000, 0);
  request.set_value_dtype(static_cast<WireDType>(9));
  IncomingFrame response;
  absl::Status s = ps.Call("Pull", OutgoingFrame::FromHeader(request), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("unknown value_dtype 9"));
}

TEST(CompressedInitTest, InitMustBeDenseFloat32) {
  PsHarness ps(SgdOptions(1, "async", 1.0f));
  InitRequest header;
  AddTensor(header.add_tensors(), "w", kW.shape, 12, DT_FLOAT16);
  absl::StatusOr<InitResponse> r = ps.InitRaw(header, Encoded(DT_FLOAT16, kW.values));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("dtype must be float32"));
}

}  // namespace
}  // namespace pstrain
