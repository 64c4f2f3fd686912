#include "common/config/cluster.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config/config_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/config/environment.h"

namespace pstrain {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A config file's cluster: one ps, two workers.
ExperimentConfig FileConfig() {
  ExperimentConfig c;
  c.mutable_cluster()->add_ps_hosts("file-ps:1000");
  c.mutable_cluster()->add_worker_hosts("file-w0:2000");
  c.mutable_cluster()->add_worker_hosts("file-w1:2001");
  return c;
}

std::string Error(const absl::StatusOr<Role>& r) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

// ---------------------------------------------------------------- host:port

TEST(ParseHostPort, AcceptsNamesIpv4AndBracketedIpv6) {
  absl::StatusOr<HostPort> a = ParseHostPort("localhost:2222");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "localhost");
  EXPECT_EQ(a->port, 2222);
  absl::StatusOr<HostPort> b = ParseHostPort("10.1.2.3:1");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "10.1.2.3");
  absl::StatusOr<HostPort> c = ParseHostPort("[::1]:65535");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 65535);
  EXPECT_TRUE(ParseHostPort("tfjob-worker-0.ns.svc.cluster.local:2222").ok());
  EXPECT_TRUE(ParseHostPort("[fe80::1%eth0]:80").ok());
}

TEST(ParseHostPort, RejectsMalformed) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "it is empty"},
      {"host", "no ':port'"},
      {":80", "the host is empty"},
      {"host:", "the port is empty"},
      {"host:0", "the port 0 is out of range 1..65535"},
      {"host:65536", "the port 65536 is out of range 1..65535"},
      {"host:http", "the port 'http' is not a number in 1..65535"},
      {"host:123456", "is not a number in 1..65535"},
      {"::1:80", "an IPv6 address needs brackets"},
      {"[::1]80", "no ':port' after the ']'"},
      {"[::1:80", "no closing ']'"},
      {"[]:80", "the host is empty"},
      {"[nothex]:80", "is not an IPv6 address"},
      {"my host:80", "is not a host name or address"},
  };
  for (const auto& [text, why] : cases) {
    absl::StatusOr<HostPort> hp = ParseHostPort(text);
    ASSERT_FALSE(hp.ok()) << text;
    EXPECT_THAT(std::string(hp.status().message()), HasSubstr(why)) << text;
  }
}

TEST(ValidateHosts, NamesSourceAndField) {
  ClusterConfig c;
  EXPECT_EQ(ValidateHosts(c, "src").message(),
            "src: field 'cluster.worker_hosts': expected at least one host:port, got none");
  c.add_worker_hosts("a:1");
  EXPECT_TRUE(ValidateHosts(c, "src").ok());  // ps hosts are not required here
  c.add_worker_hosts("a:1");
  EXPECT_EQ(ValidateHosts(c, "src").message(),
            "src: field 'cluster.worker_hosts[1]': expected a host:port no other task uses, got "
            "'a:1' (already used by cluster.worker_hosts[0])");
  c.set_worker_hosts(1, "b:99999");
  EXPECT_THAT(std::string(ValidateHosts(c, "src").message()),
              StartsWith("src: field 'cluster.worker_hosts[1]': expected host:port"));
}

// ---------------------------------------------------------------- flags

TEST(ResolveRole, FlagsIndexPicksTheBinarysJob) {
  ExperimentConfig c = FileConfig();
  ClusterFlags f;
  f.index = 1;
  absl::StatusOr<Role> r = ResolveRole(RoleKind::kWorker, f, nullptr, &c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (Role{RoleKind::kWorker, 1}));
  EXPECT_EQ(RoleToString(*r), "worker 1");

  ClusterFlags tf_style;
  tf_style.job_name = "ps";
  tf_style.task_index = 0;
  ExperimentConfig c2 = FileConfig();
  r = ResolveRole(RoleKind::kPs, tf_style, "", &c2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (Role{RoleKind::kPs, 0}));
}

TEST(ResolveRole, FlagErrors) {
  ExperimentConfig c = FileConfig();
  ClusterFlags f;
  f.job_name = "worker";
  f.index = 0;
  EXPECT_EQ(Error(ResolveRole(RoleKind::kPs, f, nullptr, &c)),
            "--job_name=worker names the worker job, but this binary runs the ps job");
  f.job_name = "chief";
  EXPECT_EQ(Error(ResolveRole(RoleKind::kWorker, f, nullptr, &c)),
            "--job_name=chief: expected ps or worker, got 'chief'");

  ClusterFlags range;
  range.index = 2;
  EXPECT_EQ(Error(ResolveRole(RoleKind::kWorker, range, nullptr, &c)),
            "--index=2 is out of range: cluster.worker_hosts has 2 entries [file-w0:2000, "
            "file-w1:2001]");
  range.index = 1;
  EXPECT_EQ(Error(ResolveRole(RoleKind::kPs, range, nullptr, &c)),
            "--index=1 is out of range: cluster.ps_hosts has 1 entry [file-ps:1000]");

  ClusterFlags both;
  both.index = 0;
  both.task_index = 1;
  EXPECT_EQ(Error(ResolveRole(RoleKind::kWorker, both, nullptr, &c)), "--index=0 and --task_index=1 disagree");

  ClusterFlags negative;
  negative.index = -5;
  EXPECT_THAT(Error(ResolveRole(RoleKind::kWorker, negative, nullptr, &c)),
              HasSubstr("--index: expected a non-negative integer, got -5"));
}

TEST(ResolveRole, DefaultIndexOnlyWhenUnambiguous) {
  ExperimentConfig c = FileConfig();
  absl::StatusOr<Role> ps = ResolveRole(RoleKind::kPs, {}, nullptr, &c);
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(*ps, (Role{RoleKind::kPs, 0}));
  EXPECT_EQ(Error(ResolveRole(RoleKind::kWorker, {}, nullptr, &c)),
            "no task index given for this worker: pass --index (or --task_index), set TF_CONFIG or start "
            "it with mpirun or srun; cluster.worker_hosts has 2 entries [file-w0:2000, file-w1:2001]");
}

TEST(ResolveRole, FlagHostListsReplaceTheFilesAndAreValidated) {
  ExperimentConfig c = FileConfig();
  ClusterFlags f;
  f.ps_hosts = "p0:1, p1:2";
  f.worker_hosts = "w0:3";
  f.index = 1;
  absl::StatusOr<Role> r = ResolveRole(RoleKind::kPs, f, nullptr, &c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(c.cluster().ps_hosts(), ElementsAre("p0:1", "p1:2"));
  EXPECT_THAT(c.cluster().worker_hosts(), ElementsAre("w0:3"));

  ExperimentConfig bad = FileConfig();
  ClusterFlags g;
  g.worker_hosts = "w0:3,w1:0";
  g.index = 0;
  EXPECT_EQ(Error(ResolveRole(RoleKind::kWorker, g, nullptr, &bad)),
            "--worker_hosts: field 'cluster.worker_hosts[1]': expected host:port with a port in "
            "1..65535 (IPv6 as [addr]:port), got 'w1:0' (the port 0 is out of range 1..65535)");
  ClusterFlags trailing;
  trailing.ps_hosts = "p:1,";
  EXPECT_THAT(Error(ResolveRole(RoleKind::kPs, trailing, nullptr, &bad)),
              HasSubstr("--ps_hosts: field 'cluster.ps_hosts[1]'"));
}

// Whether ps hosts are needed is the strategy's to say (its config check,
// tests/config/config_loader_test.cc); the role resolves without them.
TEST(ResolveRole, PsHostsAreLeftToTheStrategy) {
  ExperimentConfig c;
  c.mutable_cluster()->add_worker_hosts("w:1");
  absl::StatusOr<Role> role = ResolveRole(RoleKind::kWorker, {}, nullptr, &c);
  ASSERT_TRUE(role.ok()) << role.status();
  EXPECT_EQ(role->index, 0);
}

// ---------------------------------------------------------------- TF_CONFIG

TEST(ResolveRole, TfConfigClusterAndTask) {
  ExperimentConfig c = FileConfig();
  const char* tf = R"({"cluster": {"ps": ["tf-ps0:2222", "tf-ps1:2222"],
                                    "worker": ["tf-w0:2222", "tf-w1:2222", "tf-w2:2222"]},
                       "task": {"type": "worker", "index": 2}, "environment": "cloud"})";
  absl::StatusOr<Role> r = ResolveRole(RoleKind::kWorker, {}, tf, &c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (Role{RoleKind::kWorker, 2}));
  EXPECT_THAT(c.cluster().ps_hosts(), ElementsAre("tf-ps0:2222", "tf-ps1:2222"));
  EXPECT_THAT(c.cluster().worker_hosts(), ElementsAre("tf-w0:2222", "tf-w1:2222", "tf-w2:2222"));

  ExperimentConfig c2 = FileConfig();
  r = ResolveRole(RoleKind::kPs, {},
                  R"({"cluster": {"ps": ["a:1", "b:1"], "worker": ["c:1"]},
                      "task": {"type": "ps", "index": 1}})",
                  &c2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (Role{RoleKind::kPs, 1}));
}

TEST(ResolveRole, TfConfigChiefIsWorkerZero) {
  const char* cluster = R"("cluster": {"chief": ["chief:2222"], "ps": ["ps:2222"], "worker": ["w0:2222", "w1:2222"]})";
  ExperimentConfig c = FileConfig();
  absl::StatusOr<Role> chief = ResolveRole(
      RoleKind::kWorker, {}, (std::string("{") + cluster + R"(, "task": {"type": "chief", "index": 0}})").c_str(), &c);
  ASSERT_TRUE(chief.ok()) << chief.status();
  EXPECT_EQ(*chief, (Role{RoleKind::kWorker, 0}));
  EXPECT_THAT(c.cluster().worker_hosts(), ElementsAre("chief:2222", "w0:2222", "w1:2222"));

  ExperimentConfig c2 = FileConfig();
  absl::StatusOr<Role> w1 =
      ResolveRole(RoleKind::kWorker, {},
                  (std::string("{") + cluster + R"(, "task": {"type": "worker", "index": 1}})").c_str(), &c2);
  ASSERT_TRUE(w1.ok()) << w1.status();
  EXPECT_EQ(*w1, (Role{RoleKind::kWorker, 2}));

  // "master" is the older name of the chief.
  ExperimentConfig c3 = FileConfig();
  absl::StatusOr<Role> master = ResolveRole(
      RoleKind::kWorker, {}, R"({"cluster": {"master": ["m:1"], "ps": ["p:1"]}, "task": {"type": "master"}})", &c3);
  ASSERT_TRUE(master.ok()) << master.status();
  EXPECT_EQ(*master, (Role{RoleKind::kWorker, 0}));
  EXPECT_THAT(c3.cluster().worker_hosts(), ElementsAre("m:1"));

  // Out of range, counting the chief.
  ExperimentConfig c4 = FileConfig();
  EXPECT_EQ(
      Error(ResolveRole(RoleKind::kWorker, {},
                        (std::string("{") + cluster + R"(, "task": {"type": "worker", "index": 2}})").c_str(), &c4)),
      "TF_CONFIG task {type: worker, index: 2} (worker 3 counting the chief) is out of "
      "range: cluster.worker_hosts has 3 entries [chief:2222, w0:2222, w1:2222]");
}

TEST(ResolveRole, TfConfigErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"{not json", "TF_CONFIG: malformed JSON"},
      {"[1, 2]", "TF_CONFIG: malformed JSON"},
      {R"({"cluster": ["a:1"]})", "TF_CONFIG: cluster: expected an object"},
      {R"({"cluster": {"worker": "a:1"}})", "TF_CONFIG: cluster.worker: expected a list of \"host:port\" strings"},
      {R"({"cluster": {"worker": [1]}})", "TF_CONFIG: cluster.worker: expected a list of \"host:port\" strings"},
      {R"({"cluster": {"worker": ["a:1"], "evaluator": ["e:1"]}})",
       "TF_CONFIG: cluster: job 'evaluator' is not supported; expected ps, worker or chief"},
      {R"({"cluster": {"chief": ["a:1", "b:1"]}})", "TF_CONFIG: cluster.chief: expected exactly one host, got 2"},
      {R"({"task": {"index": 0}})", "TF_CONFIG: task.type: expected a string"},
      {R"({"task": {"type": "worker", "index": -1}})", "TF_CONFIG: task.index: expected a non-negative integer"},
      {R"({"task": {"type": "worker", "index": 0.5}})", "TF_CONFIG: task.index: expected a non-negative integer"},
      {R"({"task": {"type": "worker", "index": "0"}})", "TF_CONFIG: task.index: expected a non-negative integer"},
      {R"({"task": {"type": "worker", "idx": 0}})", "TF_CONFIG: task: unknown key 'idx'"},
      {R"({"task": {"type": "evaluator", "index": 0}})",
       "TF_CONFIG: task.type 'evaluator' is not supported; expected ps, worker or chief"},
      {R"({"task": {"type": "ps", "index": 0}})",
       "TF_CONFIG task {type: ps, index: 0} names the ps job, but this binary runs the worker "
       "job"},
      {R"({"cluster": {"worker": ["a:1"], "ps": ["p:1"]}, "task": {"type": "chief"}})",
       "TF_CONFIG: task.type is 'chief' but cluster has no chief list"},
      {R"({"cluster": {"worker": ["a:1", "b:0"], "ps": ["p:1"]}})",
       "TF_CONFIG: field 'cluster.worker_hosts[1]': expected host:port"},
      {R"({"clusters": {}})", "TF_CONFIG: unknown key 'clusters'"},
  };
  for (const auto& [json, want] : cases) {
    ExperimentConfig c = FileConfig();
    EXPECT_THAT(Error(ResolveRole(RoleKind::kWorker, {}, json, &c)), StartsWith(want)) << json;
  }
}

TEST(ResolveRole, BlankTfConfigIsIgnored) {
  for (const char* tf : {static_cast<const char*>(nullptr), "", "   \n"}) {
    ExperimentConfig c = FileConfig();
    absl::StatusOr<Role> r = ResolveRole(RoleKind::kPs, {}, tf, &c);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(c.cluster().worker_hosts(), ElementsAre("file-w0:2000", "file-w1:2001"));
  }
}

// ---------------------------------------------------------------- precedence

TEST(ResolveRole, FlagsBeatTfConfigBeatsFile) {
  const char* tf = R"({"cluster": {"ps": ["tf-ps:1"], "worker": ["tf-w0:1", "tf-w1:1"]},
                       "task": {"type": "worker", "index": 1}})";
  // TF_CONFIG over the file: both lists and the task.
  {
    ExperimentConfig c = FileConfig();
    absl::StatusOr<Role> r = ResolveRole(RoleKind::kWorker, {}, tf, &c);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, (Role{RoleKind::kWorker, 1}));
    EXPECT_THAT(c.cluster().ps_hosts(), ElementsAre("tf-ps:1"));
    EXPECT_THAT(c.cluster().worker_hosts(), ElementsAre("tf-w0:1", "tf-w1:1"));
  }
  // Flags over TF_CONFIG: the worker list and the index; the ps list stays TF_CONFIG's.
  {
    ExperimentConfig c = FileConfig();
    ClusterFlags f;
    f.worker_hosts = "flag-w0:1,flag-w1:1,flag-w2:1";
    f.index = 2;
    absl::StatusOr<Role> r = ResolveRole(RoleKind::kWorker, f, tf, &c);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, (Role{RoleKind::kWorker, 2}));
    EXPECT_THAT(c.cluster().ps_hosts(), ElementsAre("tf-ps:1"));
    EXPECT_THAT(c.cluster().worker_hosts(), ElementsAre("flag-w0:1", "flag-w1:1", "flag-w2:1"));
  }
  // A flag index overrides the whole TF_CONFIG task, even one of another job.
  {
    ExperimentConfig c = FileConfig();
    ClusterFlags f;
    f.task_index = 0;
    absl::StatusOr<Role> r = ResolveRole(RoleKind::kWorker, f, R"({"task": {"type": "ps", "index": 0}})", &c);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, (Role{RoleKind::kWorker, 0}));
    EXPECT_THAT(c.cluster().worker_hosts(), ElementsAre("file-w0:2000", "file-w1:2001"));
  }
  // The whole cluster is re-validated across sources.
  {
    ExperimentConfig c = FileConfig();
    ClusterFlags f;
    f.ps_hosts = "tf-w0:1";
    f.index = 0;
    EXPECT_EQ(Error(ResolveRole(RoleKind::kWorker, f, tf, &c)),
              "cluster (ps_hosts from --ps_hosts, worker_hosts from TF_CONFIG): field "
              "'cluster.worker_hosts[0]': expected a host:port no other task uses, got "
              "'tf-w0:1' (already used by cluster.ps_hosts[0])");
  }
}

TEST(ResolveRole, ResolvedConfigPassesValidation) {
  ExperimentConfig c;
  c.mutable_data()->set_source("synthetic");
  ClusterFlags f;
  f.ps_hosts = "localhost:5000";
  f.worker_hosts = "localhost:5001,localhost:5002";
  f.index = 1;
  ASSERT_TRUE(ResolveRole(RoleKind::kWorker, f, nullptr, &c).ok());
  EXPECT_TRUE(ValidateExperimentConfig(c, "exp.yaml").ok());
}

}  // namespace
// ---------------------------------------------------------------- launchers

using test::Env;

std::vector<LaunchRank> Ranks(std::vector<std::string> vars) {
  absl::StatusOr<std::vector<LaunchRank>> ranks = LaunchRanksFromEnvironment(Env(std::move(vars)));
  EXPECT_TRUE(ranks.ok()) << ranks.status();
  return ranks.ok() ? *ranks : std::vector<LaunchRank>{};
}

TEST(LaunchRanks, EveryLauncherInPrecedenceOrder) {
  std::vector<LaunchRank> ranks = Ranks({"RANK=3", "WORLD_SIZE=4", "SLURM_PROCID=2", "SLURM_NTASKS=4",
                                         "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "UNRELATED=1"});
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks[0].source, "OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=4 (mpirun)");
  EXPECT_EQ(ranks[1].source, "SLURM_PROCID=2, SLURM_NTASKS=4 (srun)");
  EXPECT_EQ(ranks[2].source, "RANK=3, WORLD_SIZE=4 (PyTorchJob style)");
  EXPECT_EQ(ranks[2].rank, 3);
  EXPECT_EQ(ranks[2].size, 4);
  EXPECT_TRUE(Ranks({}).empty());
}

TEST(LaunchRanks, IncompleteOrOutOfRangePairsAreRefusedNamingThem) {
  for (const auto& [vars, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"SLURM_PROCID=1"}, "SLURM_PROCID=1, SLURM_NTASKS= (srun): expected both, a rank in [0, size)"},
           {{"RANK=4", "WORLD_SIZE=4"}, "RANK=4, WORLD_SIZE=4 (PyTorchJob style): expected both, a rank in [0, size)"},
           {{"OMPI_COMM_WORLD_RANK=x", "OMPI_COMM_WORLD_SIZE=2"},
            "OMPI_COMM_WORLD_RANK=x, OMPI_COMM_WORLD_SIZE=2 (mpirun): expected both, a rank in [0, size)"}}) {
    absl::StatusOr<std::vector<LaunchRank>> ranks = LaunchRanksFromEnvironment(Env(vars));
    ASSERT_FALSE(ranks.ok());
    EXPECT_EQ(ranks.status().message(), message);
  }
}

TEST(ResolveRole, RanksOfTheWholeClusterServeAsPsFirstThenWorkers) {
  // 1 PS + 2 workers: 3 ranks.
  const std::vector<std::pair<int, Role>> expected = {
      {0, {RoleKind::kPs, 0}}, {1, {RoleKind::kWorker, 0}}, {2, {RoleKind::kWorker, 1}}};
  for (const auto& [rank, role] : expected) {
    for (RoleKind binary : {RoleKind::kPs, RoleKind::kWorker}) {
      ExperimentConfig c = FileConfig();
      std::string how;
      absl::StatusOr<Role> r =
          ResolveRole(binary, {}, nullptr, &c, Ranks({absl::StrCat("SLURM_PROCID=", rank), "SLURM_NTASKS=3"}), &how);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(*r, role) << rank;  // whichever binary srun started
      EXPECT_EQ(how, absl::StrCat("SLURM_PROCID=", rank, ", SLURM_NTASKS=3 (srun): ", RoleToString(role),
                                  " (ranks 0-0 serve as PS, 1-2 as workers)"));
    }
  }
}

TEST(ResolveRole, RanksOfTheWorkersAloneAreWorkerIndices) {
  ExperimentConfig c = FileConfig();
  std::string how;
  absl::StatusOr<Role> r = ResolveRole(RoleKind::kWorker, {}, nullptr, &c,
                                       Ranks({"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"}), &how);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (Role{RoleKind::kWorker, 1}));
  EXPECT_EQ(how, "OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=2 (mpirun): worker 1 (one rank per worker)");
  // A PS binary is no worker: a workers-only launch does not place it.
  ExperimentConfig c2 = FileConfig();
  EXPECT_THAT(
      Error(ResolveRole(RoleKind::kPs, {}, nullptr, &c2, Ranks({"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"}))),
      HasSubstr("no launcher's size fits the cluster of 1 PS and 2 workers: start 2 ranks (the workers) or 3 "
                "(the first 1 serve as PS), or pass --index"));
}

TEST(ResolveRole, ContradictoryLaunchersAreRefusedNamingBoth) {
  ExperimentConfig c = FileConfig();
  EXPECT_EQ(Error(ResolveRole(RoleKind::kWorker, {}, nullptr, &c,
                              Ranks({"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3", "RANK=2", "WORLD_SIZE=3"}))),
            "contradictory launchers: OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=3 (mpirun) but RANK=2, "
            "WORLD_SIZE=3 (PyTorchJob style); unset one, or pass --index");
  // A launcher whose size fits nothing is another launch (the srun around
  // mpirun) and is left out; agreeing ones are fine.
  ExperimentConfig c2 = FileConfig();
  absl::StatusOr<Role> r = ResolveRole(RoleKind::kWorker, {}, nullptr, &c2,
                                       Ranks({"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=3", "SLURM_PROCID=0",
                                              "SLURM_NTASKS=1", "RANK=2", "WORLD_SIZE=3"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (Role{RoleKind::kWorker, 1}));
}

TEST(ResolveRole, FlagsAndTfConfigBeatLaunchers) {
  ExperimentConfig c = FileConfig();
  ClusterFlags f;
  f.index = 0;
  absl::StatusOr<Role> r = ResolveRole(RoleKind::kWorker, f, nullptr, &c, Ranks({"SLURM_PROCID=0", "SLURM_NTASKS=3"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (Role{RoleKind::kWorker, 0}));  // not ps 0
  ExperimentConfig c2 = FileConfig();
  r = ResolveRole(RoleKind::kWorker, {}, R"({"task": {"type": "worker", "index": 1}})", &c2,
                  Ranks({"SLURM_PROCID=0", "SLURM_NTASKS=3"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (Role{RoleKind::kWorker, 1}));
}

}  // namespace pstrain
