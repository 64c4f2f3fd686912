// The all-reduce benchmark: sane figures, the nccl-tests bus bandwidth
// factor, the strategy path really fused, and `pstrain-bench allreduce
// --backend mpi` end to end (it starts mpirun itself). No speed thresholds
// (a shared machine).
#include "tools/bench/allreduce_bench.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

AllReduceBenchOptions Options(int ranks, int64_t bytes, int iterations, int variables = 4) {
  AllReduceBenchOptions o;
  o.ranks = ranks;
  o.bytes = bytes;
  o.iterations = iterations;
  o.variables = variables;
  return o;
}

void ExpectSane(const AllReducePathFigures& f) {
  for (double v : {f.seconds_per_call, f.algbw_gbytes_per_sec, f.busbw_gbytes_per_sec, f.busbw_to_memcpy}) {
    EXPECT_TRUE(std::isfinite(v) && v > 0) << v;
  }
}

TEST(AllReduceBenchTest, TwoGlooRanksGiveSaneFiguresForBothPaths) {
  absl::StatusOr<AllReduceBenchResult> r = RunGlooAllReduceBench(Options(2, int64_t{1} << 20, 3));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->options.ranks, 2);
  ExpectSane(r->reference);
  ExpectSane(r->strategy);
  EXPECT_DOUBLE_EQ(r->reference.algbw_gbytes_per_sec, (1 << 20) / r->reference.seconds_per_call / 1e9);
  EXPECT_DOUBLE_EQ(r->reference.busbw_gbytes_per_sec,
                   r->reference.algbw_gbytes_per_sec);  // 2 (n-1)/n = 1 for two ranks
  EXPECT_DOUBLE_EQ(r->strategy.busbw_to_memcpy, r->strategy.busbw_gbytes_per_sec / r->memcpy_gbytes_per_sec);
  EXPECT_DOUBLE_EQ(r->strategy_to_reference, r->reference.seconds_per_call / r->strategy.seconds_per_call);
  EXPECT_EQ(r->memcpy_buffer_bytes, int64_t{64} << 20);
  // The default 64 MiB threshold fuses the four gradients into one bucket,
  // reduced in place (they are adjacent, as a model's are).
  EXPECT_EQ(r->fusion_buckets, 1);
  EXPECT_EQ(r->buckets_in_place, 1);
}

TEST(AllReduceBenchTest, ThreeRanksBusBandwidthFactorAndSmallBuckets) {
  AllReduceBenchOptions o = Options(3, 3 * 4096, 3, 3);
  o.fusion_threshold_bytes = 4096;  // one gradient per bucket
  absl::StatusOr<AllReduceBenchResult> r = RunGlooAllReduceBench(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->reference.busbw_gbytes_per_sec, r->reference.algbw_gbytes_per_sec * 4.0 / 3.0,
              1e-9 * r->reference.algbw_gbytes_per_sec);
  EXPECT_EQ(r->fusion_buckets, 3);
}

TEST(AllReduceBenchTest, Fp16StrategyPathOverGloo) {
  AllReduceBenchOptions o = Options(2, int64_t{1} << 20, 3);
  o.compression = "fp16";
  absl::StatusOr<AllReduceBenchResult> r = RunGlooAllReduceBench(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSane(r->strategy);
  EXPECT_NE(FormatAllReduceBenchJson(*r).find("\"compression\":\"fp16\""), std::string::npos);
}

TEST(AllReduceBenchTest, BadOptionsAreNamed) {
  auto message = [](AllReduceBenchOptions o) { return std::string(ValidateAllReduceBenchOptions(o).message()); };
  EXPECT_THAT(message(Options(0, 1024, 1)), HasSubstr("--ranks 0"));
  EXPECT_THAT(message(Options(2, 1020, 1, 2)), HasSubstr("multiple of 4 x --variables (8)"));
  EXPECT_THAT(message(Options(2, 1024, 0)), HasSubstr("--iterations 0"));
  AllReduceBenchOptions nccl = Options(2, 1024, 1);
  nccl.backend = "nccl";
  EXPECT_THAT(message(nccl), HasSubstr("gloo or mpi"));
  AllReduceBenchOptions topk = Options(2, 1024, 1);
  topk.compression = "topk";
  EXPECT_THAT(message(topk), HasSubstr("none, fp16 or bf16"));
  EXPECT_TRUE(absl::IsInvalidArgument(RunGlooAllReduceBench(Options(2, 6, 1)).status()));
}

TEST(AllReduceBenchTest, MpiRankOutsideMpirunSaysHowToRunIt) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) GTEST_SKIP() << "started by mpirun";
  AllReduceBenchOptions o = Options(2, 1024, 1);
  o.backend = "mpi";
  absl::Status s = RunMpiAllReduceRank(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
}

// The binary as a user runs it: it starts `mpirun -np 2` of itself and
// prints one JSON object with the MPI figures and the Gloo ones beside.
TEST(AllReduceBenchCommandTest, MpiBackendStartsMpirunAndPrintsBothLibraries) {
  test::TempDir dir;
  test::Subprocess bench = test::Spawn({test::BinDir() + "/pstrain-bench", "allreduce", "--backend", "mpi", "--ranks",
                                        "2", "--bytes", "65536", "--iterations", "3", "--json"},
                                       dir.path());
  std::optional<int> status = test::WaitForExit(bench.pid, std::chrono::minutes(3));
  ASSERT_TRUE(status.has_value()) << "pstrain-bench did not finish";
  const std::string out = bench.out();
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == 1 && bench.err().find("without Open MPI") != std::string::npos) {
    GTEST_SKIP() << "built without Open MPI";
  }
  ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << out << bench.err();
  EXPECT_THAT(out, HasSubstr("\"backend\":\"mpi\",\"compression\":\"none\",\"ranks\":2,\"bytes\":65536"));
  EXPECT_THAT(out, HasSubstr("\"strategy\":{\"seconds_per_call\":"));
  EXPECT_THAT(out, HasSubstr(",\"gloo\":{\"backend\":\"gloo\""));
  EXPECT_EQ(out.find("nan"), std::string::npos) << out;
}

}  // namespace
}  // namespace pstrain
