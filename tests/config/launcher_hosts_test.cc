// Host lists from the launcher: Slurm's compressed lists, Open MPI hostfiles,
// the placements, and ResolveRole filling empty host lists from them.
#include "common/config/launcher_hosts.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/config/environment.h"
#include "tests/util/process_test_util.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using test::Env;

LaunchRank Rank(Launcher launcher, int rank, int size) {
  return LaunchRank{launcher, rank, size, absl::StrCat("rank ", rank, " of ", size)};
}

std::string ErrorOf(const absl::Status& s) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(ExpandSlurmHostList, RangesPaddingListsAndProducts) {
  EXPECT_THAT(*ExpandSlurmHostList("node[01-03,7],gpu-a"), ElementsAre("node01", "node02", "node03", "node7", "gpu-a"));
  EXPECT_THAT(*ExpandSlurmHostList("r[1-2]n[08-09]"), ElementsAre("r1n08", "r1n09", "r2n08", "r2n09"));
  EXPECT_THAT(*ExpandSlurmHostList("login1"), ElementsAre("login1"));
  EXPECT_THAT(*ExpandSlurmHostList("a[9-10]"), ElementsAre("a9", "a10"));
}

TEST(ExpandSlurmHostList, MalformedListsNameTheirPart) {
  for (const auto& [list, message] : std::vector<std::pair<std::string, std::string>>{
           {"node[1-", "'[' without ']'"},
           {"node]1", "']' without '['"},
           {"a[[1]]", "nested '['"},
           {"a,,b", "empty host name"},
           {"n[3-1]", "range '3-1' runs backwards"},
           {"n[x]", "expected a number or a range like 01-04 inside [], got 'x'"},
           {"n[]", "expected a number or a range like 01-04 inside [], got ''"}}) {
    absl::StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostList(list);
    ASSERT_FALSE(hosts.ok()) << list;
    EXPECT_THAT(ErrorOf(hosts.status()), HasSubstr(absl::StrCat("host list '", list, "': ", message)));
  }
}

TEST(ExpandSlurmTasksPerNode, RepeatsAndErrors) {
  EXPECT_THAT(*ExpandSlurmTasksPerNode("2(x3),1"), ElementsAre(2, 2, 2, 1));
  EXPECT_THAT(*ExpandSlurmTasksPerNode("4"), ElementsAre(4));
  for (const char* bad : {"0", "2(x)", "2(x0)", "a", "2(x3", ""}) {
    absl::StatusOr<std::vector<int>> counts = ExpandSlurmTasksPerNode(bad);
    ASSERT_FALSE(counts.ok()) << bad;
    EXPECT_THAT(ErrorOf(counts.status()), HasSubstr("expected counts like 2(x3),1"));
  }
}

TEST(ParseHostfile, CommentsRepeatsAndSlots) {
  absl::StatusOr<std::vector<HostSlots>> hosts =
      ParseHostfile("# the pods\nw0 slots=2 max_slots=4\n\n  w1   # no slots\nw0 slots=1\nw2\tslots=3\n", "hf");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].host, "w0");
  EXPECT_EQ((*hosts)[0].slots, 3);  // listed twice: slots add up
  EXPECT_EQ((*hosts)[1].slots, 0);  // not given
  EXPECT_EQ((*hosts)[2].slots, 3);
}

TEST(ParseHostfile, BadLinesNameFileAndLine) {
  EXPECT_EQ(ErrorOf(ParseHostfile("w0 slots=2\nw1 slots=two\n", "hosts").status()),
            "hosts:2: 'w1 slots=two': expected 'host [slots=N] [max_slots=N]', got 'slots=two'");
  EXPECT_THAT(ErrorOf(ParseHostfile("w0 cpus=2\n", "hosts").status()), HasSubstr("got 'cpus=2'"));
  EXPECT_EQ(ErrorOf(ParseHostfile("# nothing\n\n", "hosts").status()), "hosts: the hostfile lists no host");
}

TEST(PlaceRanks, BlockFillsEachHostCyclicDeals) {
  EXPECT_THAT(PlaceRanks({"a", "b"}, {2, 1}, Distribution::kBlock),
              ElementsAre(RankPlace{"a", 0}, RankPlace{"a", 1}, RankPlace{"b", 0}));
  EXPECT_THAT(PlaceRanks({"a", "b"}, {3, 1}, Distribution::kCyclic),
              ElementsAre(RankPlace{"a", 0}, RankPlace{"b", 0}, RankPlace{"a", 1}, RankPlace{"a", 2}));
}

TEST(LaunchedHostPorts, SrunBlockAndCyclic) {
  ClusterConfig cluster;
  const std::vector<std::string> step = {"SLURM_STEP_NODELIST=n[1-2]", "SLURM_STEP_TASKS_PER_NODE=2(x2)",
                                         "SLURM_JOB_NODELIST=n[1-9]", "SLURM_TASKS_PER_NODE=1(x9)"};
  EXPECT_THAT(*LaunchedHostPorts(Rank(Launcher::kSrun, 3, 4), cluster, Env(step)),
              ElementsAre("n1:2222", "n1:2223", "n2:2222", "n2:2223"));
  std::vector<std::string> cyclic = step;
  cyclic.push_back("SLURM_DISTRIBUTION=cyclic:block");
  cyclic.push_back("SLURMD_NODENAME=n2");
  cyclic.push_back("SLURM_LOCALID=1");
  cluster.set_port(3000);
  EXPECT_THAT(*LaunchedHostPorts(Rank(Launcher::kSrun, 3, 4), cluster, Env(cyclic)),
              ElementsAre("n1:3000", "n2:3000", "n1:3001", "n2:3001"));
  // Only the job's variables (sbatch's environment, no step yet).
  EXPECT_THAT(*LaunchedHostPorts(Rank(Launcher::kSrun, 0, 2), cluster,
                                 Env({"SLURM_JOB_NODELIST=c7", "SLURM_TASKS_PER_NODE=2"})),
              ElementsAre("c7:3000", "c7:3001"));
}

TEST(LaunchedHostPorts, SrunDisagreementsAreRefusedNamingTheVariables) {
  ClusterConfig cluster;
  const std::vector<std::string> step = {"SLURM_STEP_NODELIST=n[1-2]", "SLURM_STEP_TASKS_PER_NODE=2(x2)"};
  auto error = [&](LaunchRank rank, std::vector<std::string> extra) {
    std::vector<std::string> vars = step;
    vars.insert(vars.end(), extra.begin(), extra.end());
    absl::StatusOr<std::vector<std::string>> hosts = LaunchedHostPorts(rank, cluster, Env(vars));
    EXPECT_FALSE(hosts.ok());
    return hosts.ok() ? std::string() : ErrorOf(hosts.status());
  };
  EXPECT_EQ(error(Rank(Launcher::kSrun, 2, 4), {"SLURMD_NODENAME=n1"}),
            "SLURMD_NODENAME=n1: task 2 runs there, but SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE place it on "
            "n2");
  EXPECT_EQ(error(Rank(Launcher::kSrun, 1, 4), {"SLURM_LOCALID=0"}),
            "SLURM_LOCALID=0: task 1 is local task 0 on its node, but the block placement makes it 1");
  EXPECT_EQ(error(Rank(Launcher::kSrun, 1, 5), {}),
            "SLURM_STEP_TASKS_PER_NODE=2(x2) places 4 tasks but rank 1 of 5 says 5");
  EXPECT_THAT(error(Rank(Launcher::kSrun, 1, 4), {"SLURM_DISTRIBUTION=plane=2"}),
              HasSubstr("SLURM_DISTRIBUTION=plane=2: pstrain can place ranks for block or cyclic only"));
  absl::StatusOr<std::vector<std::string>> none =
      LaunchedHostPorts(Rank(Launcher::kSrun, 0, 2), cluster, Env({"SLURM_STEP_TASKS_PER_NODE=2"}));
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(ErrorOf(none.status()), HasSubstr("srun gives no SLURM_STEP_NODELIST or SLURM_JOB_NODELIST"));
  absl::StatusOr<std::vector<std::string>> mismatch = LaunchedHostPorts(
      Rank(Launcher::kSrun, 0, 2), cluster, Env({"SLURM_STEP_NODELIST=a,b", "SLURM_STEP_TASKS_PER_NODE=2"}));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(ErrorOf(mismatch.status()),
            "SLURM_STEP_NODELIST=a,b names 2 nodes but SLURM_STEP_TASKS_PER_NODE=2 gives counts for 1");
}

TEST(LaunchedHostPorts, MpirunFromTheHostfileBySlot) {
  test::TempDir dir;
  test::WriteFile(dir / "hosts", "pod-0 slots=2\npod-1\n");
  ClusterConfig cluster;
  EXPECT_THAT(*LaunchedHostPorts(Rank(Launcher::kMpirun, 0, 3), cluster,
                                 Env({"OMPI_MCA_orte_default_hostfile=" + (dir / "hosts")})),
              ElementsAre("pod-0:2222", "pod-0:2223", "pod-1:2222"));
  // cluster.hostfile beats the variable.
  test::WriteFile(dir / "mine", "a slots=1\nb slots=1\n");
  cluster.set_hostfile(dir / "mine");
  EXPECT_THAT(
      *LaunchedHostPorts(Rank(Launcher::kMpirun, 1, 2), cluster,
                         Env({"OMPI_MCA_orte_default_hostfile=" + (dir / "hosts"), "OMPI_COMM_WORLD_LOCAL_RANK=0"})),
      ElementsAre("a:2222", "b:2222"));
  // One host, no hostfile: every rank is here.
  EXPECT_THAT(*LaunchedHostPorts(Rank(Launcher::kMpirun, 1, 2), ClusterConfig(), Env({"OMPI_COMM_WORLD_LOCAL_SIZE=2"})),
              ElementsAre("localhost:2222", "localhost:2223"));
}

TEST(LaunchedHostPorts, MpirunErrorsSayWhatToGive) {
  test::TempDir dir;
  auto error = [&](const std::string& hostfile, LaunchRank rank, std::vector<std::string> vars) {
    ClusterConfig cluster;
    if (!hostfile.empty()) {
      test::WriteFile(dir / "hf", hostfile);
      cluster.set_hostfile(dir / "hf");
    }
    absl::StatusOr<std::vector<std::string>> hosts = LaunchedHostPorts(rank, cluster, Env(std::move(vars)));
    EXPECT_FALSE(hosts.ok());
    return hosts.ok() ? std::string() : ErrorOf(hosts.status());
  };
  EXPECT_THAT(error("", Rank(Launcher::kMpirun, 0, 4), {"OMPI_COMM_WORLD_LOCAL_SIZE=2"}),
              HasSubstr("the ranks run on several hosts (OMPI_COMM_WORLD_LOCAL_SIZE=2); give cluster.hostfile"));
  EXPECT_EQ(error("a slots=1\nb slots=1\n", Rank(Launcher::kMpirun, 0, 3), {}),
            absl::StrCat(dir / "hf", ": 2 slots for 3 ranks (rank 0 of 3)"));
  EXPECT_THAT(error("a\nb slots=2\n", Rank(Launcher::kMpirun, 0, 3), {}),
              HasSubstr("host 'a' gives no slots=N but is not the last host"));
  EXPECT_THAT(error("a slots=2\nb slots=2\n", Rank(Launcher::kMpirun, 1, 4), {"OMPI_COMM_WORLD_LOCAL_RANK=0"}),
              HasSubstr("OMPI_COMM_WORLD_LOCAL_RANK=0: rank 1 is local rank 0 on its host, but filling"));
  ClusterConfig missing;
  missing.set_hostfile(dir / "nope");
  absl::StatusOr<std::vector<std::string>> hosts = LaunchedHostPorts(Rank(Launcher::kMpirun, 0, 2), missing, Env({}));
  ASSERT_FALSE(hosts.ok());
  EXPECT_EQ(ErrorOf(hosts.status()), absl::StrCat("cluster.hostfile: cannot read the hostfile '", dir / "nope", "'"));
}

TEST(LaunchedHostPorts, RankAndWorldSizeGiveNoHosts) {
  absl::StatusOr<std::vector<std::string>> hosts =
      LaunchedHostPorts(Rank(Launcher::kRankEnv, 0, 2), ClusterConfig(), Env({}));
  ASSERT_FALSE(hosts.ok());
  EXPECT_THAT(ErrorOf(hosts.status()), HasSubstr("gives the role but not where the other ranks run"));
}

// ---------------------------------------------------------------- ResolveRole

absl::StatusOr<Role> ResolveFromSrun(RoleKind binary, int rank, ExperimentConfig* config, std::string* how = nullptr) {
  const auto env = Env({absl::StrCat("SLURM_PROCID=", rank), "SLURM_NTASKS=3", "SLURM_STEP_NODELIST=n[1-2]",
                        "SLURM_STEP_TASKS_PER_NODE=2,1"});
  absl::StatusOr<std::vector<LaunchRank>> launched = LaunchRanksFromEnvironment(env);
  EXPECT_TRUE(launched.ok());
  return ResolveRole(binary, {}, nullptr, config, *launched, how,
                     [&](const LaunchRank& r, const ClusterConfig& c) { return LaunchedHostPorts(r, c, env); });
}

TEST(ResolveRole, EmptyHostListsComeFromTheLauncher) {
  ExperimentConfig c;
  c.mutable_cluster()->set_num_ps(1);
  std::string how;
  absl::StatusOr<Role> role = ResolveFromSrun(RoleKind::kWorker, 2, &c, &how);
  ASSERT_TRUE(role.ok()) << role.status();
  EXPECT_EQ(*role, (Role{RoleKind::kWorker, 1}));
  EXPECT_THAT(c.cluster().ps_hosts(), ElementsAre("n1:2222"));
  EXPECT_THAT(c.cluster().worker_hosts(), ElementsAre("n1:2223", "n2:2222"));
  EXPECT_EQ(how, "SLURM_PROCID=2, SLURM_NTASKS=3 (srun): worker 1 (ranks 0-0 serve as PS, 1-2 as workers)");
  // Rank 0 is the PS, whichever binary srun started.
  ExperimentConfig c0;
  c0.mutable_cluster()->set_num_ps(1);
  role = ResolveFromSrun(RoleKind::kWorker, 0, &c0);
  ASSERT_TRUE(role.ok()) << role.status();
  EXPECT_EQ(*role, (Role{RoleKind::kPs, 0}));
  // num_ps 0: all workers.
  ExperimentConfig all;
  role = ResolveFromSrun(RoleKind::kWorker, 0, &all);
  ASSERT_TRUE(role.ok()) << role.status();
  EXPECT_EQ(*role, (Role{RoleKind::kWorker, 0}));
  EXPECT_EQ(all.cluster().worker_hosts_size(), 3);
}

TEST(ResolveRole, NumPsIsCheckedAgainstTheRanksAndListedHosts) {
  ExperimentConfig c;
  c.mutable_cluster()->set_num_ps(3);
  absl::StatusOr<Role> role = ResolveFromSrun(RoleKind::kWorker, 0, &c);
  ASSERT_FALSE(role.ok());
  EXPECT_EQ(ErrorOf(role.status()),
            "field 'cluster.num_ps': 3 PS shards leave no worker among the 3 ranks of SLURM_PROCID=0, SLURM_NTASKS=3 "
            "(srun)");
  // Listed hosts are used as they are, and num_ps must agree with them.
  ExperimentConfig listed;
  listed.mutable_cluster()->add_ps_hosts("p:1");
  listed.mutable_cluster()->add_worker_hosts("w:1");
  listed.mutable_cluster()->add_worker_hosts("w:2");
  listed.mutable_cluster()->set_num_ps(2);
  role = ResolveFromSrun(RoleKind::kWorker, 0, &listed);
  ASSERT_FALSE(role.ok());
  EXPECT_EQ(ErrorOf(role.status()),
            "field 'cluster.num_ps': 2, but the ps_hosts from config file list 1 (num_ps is for host lists from the "
            "launcher; leave it out or make it agree)");
  listed.mutable_cluster()->set_num_ps(1);
  role = ResolveFromSrun(RoleKind::kWorker, 0, &listed);
  ASSERT_TRUE(role.ok()) << role.status();
  EXPECT_THAT(listed.cluster().worker_hosts(), ElementsAre("w:1", "w:2"));
  // num_ps without a launcher: nothing gives the hosts.
  ExperimentConfig alone;
  alone.mutable_cluster()->set_num_ps(1);
  role = ResolveRole(RoleKind::kWorker, {}, nullptr, &alone, {}, nullptr,
                     [](const LaunchRank&, const ClusterConfig&) -> absl::StatusOr<std::vector<std::string>> {
                       return absl::InternalError("not called without a launcher");
                     });
  ASSERT_FALSE(role.ok());
  EXPECT_THAT(ErrorOf(role.status()), HasSubstr("cluster.num_ps alone takes the hosts from srun or mpirun, which did "
                                                "not start this process; list the hosts"));
  ExperimentConfig bad_port;
  bad_port.mutable_cluster()->set_port(70000);
  role = ResolveFromSrun(RoleKind::kWorker, 0, &bad_port);
  ASSERT_FALSE(role.ok());
  EXPECT_EQ(ErrorOf(role.status()), "field 'cluster.port': expected a port in 1..65535, got 70000");
}

}  // namespace
}  // namespace pstrain
