// allreduce over the mpi collective, each worker a process: ctest runs this
// binary as the ranks of one mpirun (tests/worker/CMakeLists.txt), every rank
// runs RunWorker as the worker of its MPI rank, exactly as pstrain-worker
// does under mpirun, and the chief compares the parameters it ends with
// against one device trained on the whole global batch (in process, after
// the distributed run).
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/transport/inproc/inproc_transport.h"
#include "gtest/gtest.h"
#include "tests/worker/equivalence_util.h"
#include "worker/run/trainer.h"

namespace pstrain {
namespace {

// mpirun's rank and size; size 0 when not started by mpirun.
int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  int n = 0;
  return v != nullptr && absl::SimpleAtoi(v, &n) ? n : 0;
}

struct MpiCase {
  const char* name;
  int workers;
  int devices;
  int64_t fusion_threshold_bytes;
  bool hierarchical;
  int workers_per_host;
};
void PrintTo(const MpiCase& c, std::ostream* os) { *os << c.name; }

class MpiEquivalenceTest : public ::testing::TestWithParam<MpiCase> {};

TEST_P(MpiEquivalenceTest, MatchesOneDeviceWithTheWholeBatch) {
  const MpiCase& c = GetParam();
  const int rank = EnvInt("OMPI_COMM_WORLD_RANK"), size = EnvInt("OMPI_COMM_WORLD_SIZE");
  if (size != c.workers) GTEST_SKIP() << "needs mpirun -np " << c.workers << " (this job has " << size << " ranks)";
  const int kBatch = 8;
  ExperimentConfig config = EquivalenceConfig(absl::StrCat("mpi_", c.name));
  config.set_variable_update("allreduce");
  config.set_collective("mpi");
  config.set_devices_per_worker(c.devices);
  config.set_fusion_threshold_bytes(c.fusion_threshold_bytes);
  config.set_hierarchical_allreduce(c.hierarchical);
  if (c.hierarchical) config.set_workers_per_host(c.workers_per_host);
  config.mutable_timeouts()->set_startup_seconds(60);
  config.mutable_timeouts()->set_sync_step_seconds(60);
  for (int w = 0; w < c.workers; ++w) config.mutable_cluster()->add_worker_hosts(absl::StrCat("127.0.0.1:", 1 + w));
  config.mutable_train()->set_batch_size_per_device(kBatch);

  InprocTransport transport;  // no parameter servers; nothing is served
  std::vector<std::vector<float>> final_params;
  WorkerRunOptions options;
  options.listen_address = absl::StrCat("worker", rank, ":1");
  if (rank == 0) options.final_parameters = &final_params;
  absl::StatusOr<RunResult> result = RunWorker(config, rank, &transport, options);
  ASSERT_TRUE(result.ok()) << "rank " << rank << ": " << result.status();
  if (rank != 0) return;
  EXPECT_EQ(result->num_workers(), c.workers);
  EXPECT_EQ(result->global_batch_size(), kBatch * c.workers * c.devices);

  absl::StatusOr<ClusterRun> single =
      RunOnOneDevice(EquivalenceConfig(absl::StrCat("mpi_", c.name)), kBatch * c.workers * c.devices);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_LT(MaxRelativeDifference(final_params, single->final_params), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Collectives, MpiEquivalenceTest,
                         ::testing::Values(MpiCase{"two_workers_fused", 2, 1, 64 << 20, false, 0},
                                           MpiCase{"two_workers_two_devices_small_buckets", 2, 2, 4096, false, 0},
                                           MpiCase{"four_workers_per_variable", 4, 1, 0, false, 0},
                                           MpiCase{"hierarchical_2_hosts_x_2_workers", 4, 1, 64 << 20, true, 2}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace pstrain
