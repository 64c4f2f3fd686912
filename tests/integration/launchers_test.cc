// Roles from the launchers users have, with real processes: one mpirun
// starting every role of a parameter-server experiment from the worker
// binary (ranks 0..P-1 become PS shards by running pstrain-ps), a
// Slurm-style environment resolving roles the same way, and contradictory
// launchers refused naming both.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/metrics/result_json.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/util/process_test_util.h"
#include "tools/launch/free_ports.h"
#include "tools/launch/mpirun.h"

namespace pstrain::test {
namespace {

namespace fs = std::filesystem;

// The shipped sync MLP (2 PS + 2 workers) on free loopback ports, one epoch.
std::string WriteSyncConfig(const std::string& dir) {
  const std::string ps = FreeLoopbackHosts(2), workers = FreeLoopbackHosts(2);
  std::string yaml = ReadFile(SourcePath("configs/fashion_mnist_mlp_sync.yaml"));
  yaml = absl::StrReplaceAll(
      yaml, {{R"(ps_hosts: ["localhost:2222", "localhost:2223"])",
              absl::StrCat(R"(ps_hosts: [")", NthHost(ps, 0), R"(", ")", NthHost(ps, 1), R"("])")},
             {R"(worker_hosts: ["localhost:2224", "localhost:2225"])",
              absl::StrCat(R"(worker_hosts: [")", NthHost(workers, 0), R"(", ")", NthHost(workers, 1), R"("])")},
             {"epochs: 3", "epochs: 1"}});
  const std::string path = dir + "/sync.yaml";
  WriteFile(path, yaml);
  return path;
}

// A base port with `n` free ports from it (host lists from the launcher
// give a host's k-th rank cluster.port + k).
int FreeConsecutivePorts(int n) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    absl::StatusOr<std::vector<int>> one = launch::PickFreeLoopbackPorts(1);
    if (!one.ok() || (*one)[0] + n > 65535) continue;
    bool all_free = true;
    for (int k = 0; k < n && all_free; ++k) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons((*one)[0] + k);
      all_free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
      close(fd);
    }
    if (all_free) return (*one)[0];
  }
  ADD_FAILURE() << "no " << n << " consecutive free ports";
  return 0;
}

// The shipped sync MLP (2 PS + 2 workers), one epoch, listing no hosts: they
// come from the launcher (cluster.num_ps 2, ports from a free base).
std::string WriteLauncherHostsConfig(const std::string& dir, int* port, const std::string& extra = "") {
  *port = FreeConsecutivePorts(4);
  std::string yaml = ReadFile(SourcePath("configs/fashion_mnist_mlp_sync.yaml"));
  yaml = absl::StrReplaceAll(yaml, {{R"(  ps_hosts: ["localhost:2222", "localhost:2223"])",
                                     absl::StrCat("  num_ps: 2\n  port: ", *port, extra)},
                                    {R"(  worker_hosts: ["localhost:2224", "localhost:2225"])"
                                     "\n",
                                     ""},
                                    {"epochs: 3", "epochs: 1"}});
  const std::string path = dir + "/sync.yaml";
  WriteFile(path, yaml);
  return path;
}

// What every role prints about the cluster of 4 ranks on localhost from `port`.
std::string ExpectedClusterLine(int port) {
  return absl::StrCat("cluster: ps_hosts [localhost:", port, ", localhost:", port + 1,
                      "] worker_hosts [localhost:", port + 2, ", localhost:", port + 3, "]");
}

void ExpectTrained(const std::string& run_dir) {
  absl::StatusOr<RunResult> result = ReadResultJson(run_dir + "/result.json");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->num_ps(), 2);
  EXPECT_EQ(result->num_workers(), 2);
  ASSERT_TRUE(result->has_test_accuracy());
  EXPECT_GE(result->test_accuracy(), 0.82);  // one epoch of the sync MLP
}

bool ExitedWith(const std::optional<int>& status, int code) {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == code;
}

// Also: the host lists from the hostfile mpirun placed the ranks from.
TEST(LaunchersTest, OneMpirunStartsEveryRoleOfAParameterServerExperiment) {
  TempDir dir;
  WriteFile(dir.path() + "/hostfile", "# one host, four slots\nlocalhost slots=4\n");
  int port = 0;
  const std::string config =
      WriteLauncherHostsConfig(dir.path(), &port, absl::StrCat("\n  hostfile: ", dir.path(), "/hostfile"));
  const std::string run_dir = dir.path() + "/run";
  absl::StatusOr<launch::RoleSpec> mpirun =
      launch::MpirunRole(4, BinDir() + "/pstrain-worker", {"--config=" + config, "--run_dir=" + run_dir});
  if (!mpirun.ok()) GTEST_SKIP() << mpirun.status().message();
  std::vector<std::string> argv = {mpirun->binary, "--hostfile", dir.path() + "/hostfile"};
  argv.insert(argv.end(), mpirun->args.begin(), mpirun->args.end());
  Subprocess job = Spawn(argv, dir.path());
  std::optional<int> status = WaitForExit(job.pid, std::chrono::minutes(5));
  const std::string out = job.out() + job.err();
  ASSERT_TRUE(ExitedWith(status, 0)) << out;
  for (const std::string role : {"ps 0", "ps 1", "worker 0", "worker 1"}) {
    EXPECT_TRUE(absl::StrContains(out, absl::StrCat("(mpirun): ", role, " (ranks 0-1 serve as PS, 2-3 as workers)")))
        << role << "\n"
        << out;
  }
  EXPECT_TRUE(absl::StrContains(out, ExpectedClusterLine(port))) << out;
  ExpectTrained(run_dir);
}

// Also: the host lists from Slurm's node list and tasks per node.
TEST(LaunchersTest, ASlurmEnvironmentResolvesRolesTheSameWay) {
  TempDir dir;
  int port = 0;
  const std::string config = WriteLauncherHostsConfig(dir.path(), &port);
  const std::string run_dir = dir.path() + "/run";
  std::vector<Subprocess> tasks;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string capture = dir.path() + "/task" + std::to_string(rank);
    fs::create_directories(capture);
    // What srun sets for each of its 4 tasks on one node (cyclic over one
    // node is block); every task runs the worker binary.
    tasks.push_back(
        Spawn({"/usr/bin/env", absl::StrCat("SLURM_PROCID=", rank), "SLURM_NTASKS=4", "SLURM_STEP_NODELIST=localhost",
               "SLURM_STEP_TASKS_PER_NODE=4", absl::StrCat("SLURM_LOCALID=", rank), "SLURMD_NODENAME=localhost",
               "SLURM_DISTRIBUTION=cyclic", BinDir() + "/pstrain-worker", "--config=" + config, "--run_dir=" + run_dir},
              capture));
  }
  for (int rank = 0; rank < 4; ++rank) {
    std::optional<int> status = WaitForExit(tasks[rank].pid, std::chrono::minutes(5));
    EXPECT_TRUE(ExitedWith(status, 0)) << "task " << rank << ":\n" << tasks[rank].out() << tasks[rank].err();
  }
  EXPECT_TRUE(absl::StrContains(tasks[0].out(), "role: SLURM_PROCID=0, SLURM_NTASKS=4 (srun): ps 0")) << tasks[0].out();
  EXPECT_TRUE(absl::StrContains(tasks[3].out(), "role: SLURM_PROCID=3, SLURM_NTASKS=4 (srun): worker 1"))
      << tasks[3].out();
  EXPECT_TRUE(absl::StrContains(tasks[3].out(), ExpectedClusterLine(port))) << tasks[3].out();
  ExpectTrained(run_dir);
}

TEST(LaunchersTest, ContradictoryLaunchersAreRefusedNamingBoth) {
  TempDir dir;
  const std::string config = WriteSyncConfig(dir.path());
  Subprocess worker = Spawn({"/usr/bin/env", "OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", "SLURM_PROCID=3",
                             "SLURM_NTASKS=4", BinDir() + "/pstrain-worker", "--config=" + config},
                            dir.path());
  std::optional<int> status = WaitForExit(worker.pid, std::chrono::seconds(60));
  EXPECT_TRUE(ExitedWith(status, 2)) << worker.err();
  EXPECT_TRUE(absl::StrContains(worker.err(),
                                "contradictory launchers: OMPI_COMM_WORLD_RANK=2, OMPI_COMM_WORLD_SIZE=4 (mpirun) but "
                                "SLURM_PROCID=3, SLURM_NTASKS=4 (srun); unset one, or pass --index"))
      << worker.err();
}

}  // namespace
}  // namespace pstrain::test
