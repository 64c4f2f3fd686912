// `pstrain-bench ps --processes`: every shard and worker a process of its
// own (pstrain-bench itself, as the hidden ps-role subcommand). The same
// figures and exact byte accounting as the threads; a role that dies is
// named with how it died, promptly, and leaves no role behind; bad flag
// combinations exit 2 naming the flag; --emulated_hosts where root can make
// network namespaces (skipped, saying why, elsewhere). Tiny runs: seconds
// each.
#include "tools/bench/ps_bench_processes.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/transport/transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"
#include "tools/bench/ps_bench.h"
#include "tools/launch/emulated_hosts.h"
#include "tools/launch/host_cpus.h"

namespace pstrain::bench {
namespace {

using ::testing::HasSubstr;

PsBenchOptions TinyProcesses(const std::string& transport) {
  PsBenchOptions options;
  options.workers = 2;
  options.servers = 2;
  options.keys = 4;
  options.key_bytes = 4096;
  options.transport = transport;
  options.rounds = 5;
  options.warmup_rounds = 1;
  options.memcpy_seconds = 0.05;
  options.processes = true;
  options.role_binary = test::BinDir() + "/pstrain-bench";
  return options;
}

void ExpectPositiveFinite(double v, const char* what) {
  EXPECT_TRUE(std::isfinite(v)) << what << " = " << v;
  EXPECT_GT(v, 0) << what;
}

// Children of this process still running `pstrain-bench ps-role`.
std::vector<pid_t> LiveRoles() {
  std::vector<pid_t> roles;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = test::ReadFile(entry.path().string() + "/cmdline");
    const std::string stat = test::ReadFile(entry.path().string() + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || cmdline.find("ps-role") == std::string::npos) continue;
    std::istringstream fields(stat.substr(paren + 2));
    char state = 0;
    long ppid = 0;
    fields >> state >> ppid;
    if (ppid == getpid() && state != 'Z') roles.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return roles;
}

void ExpectSaneRun(const PsBenchOptions& options) {
  absl::StatusOr<PsBenchResult> result = RunPsBench(options);
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectPositiveFinite(result->push.gbps, "push_gbps");
  ExpectPositiveFinite(result->pull.gbps, "pull_gbps");
  ExpectPositiveFinite(result->pushpull.gbps, "pushpull_gbps");
  ExpectPositiveFinite(result->tcp_oneway.gbps, "tcp_oneway_gbps");
  ExpectPositiveFinite(result->tcp.gbps, "tcp_gbps");
  EXPECT_DOUBLE_EQ(result->pushpull_to_tcp, result->pushpull.gbps / result->tcp.gbps);
  const int64_t timed = options.rounds * options.workers;
  for (const PhaseResult* p : {&result->push, &result->pull, &result->pushpull, &result->tcp_oneway, &result->tcp}) {
    EXPECT_EQ(p->rounds, timed);
  }
  // What the shards saw, from their final stats over the control channel.
  const int64_t round_bytes = options.keys * options.key_bytes;
  ASSERT_EQ(result->shard_loads.size(), static_cast<size_t>(options.servers));
  EXPECT_EQ(result->shard_bytes_in, round_bytes + result->push_calls * round_bytes);
  EXPECT_EQ(result->shard_bytes_out, result->pull_calls * round_bytes);
  // Worker 0's load snapshots came back too.
  EXPECT_EQ(result->push.cost.shard_applied_updates, result->push.rounds * options.keys);
  EXPECT_EQ(result->pull.cost.shard_applied_updates, 0);
  EXPECT_THAT(FormatPsBenchTable(options, *result), HasSubstr("transport=" + options.transport + " processes\n"));
  EXPECT_THAT(FormatPsBenchJson(options, *result),
              HasSubstr(options.emulated_hosts > 0 ? "\"mode\":\"emulated_hosts\",\"emulated_hosts\":2"
                                                   : "\"mode\":\"processes\"}"));
  EXPECT_TRUE(LiveRoles().empty());
}

TEST(PsBenchProcessesTest, GrpcOnLoopbackGivesTheSameFiguresAndAccounting) { ExpectSaneRun(TinyProcesses("grpc")); }

TEST(PsBenchProcessesTest, UcxOnLoopbackGivesTheSameFiguresAndAccounting) {
  const std::vector<std::string> known = RegisteredTransports();
  if (std::find(known.begin(), known.end(), "ucx") == known.end()) GTEST_SKIP() << "built without UCX";
  ExpectSaneRun(TinyProcesses("ucx"));
}

// A role that dies (`kill_role`; or every role, when they run `binary`):
// the bench stops the others and names it with how it died (`how`),
// without waiting for any deadline.
void ExpectNamedPromptly(const std::string& kill_role, const std::string& how, const std::string& binary = "") {
  PsBenchOptions options = TinyProcesses("grpc");
  options.kill_role = kill_role;
  if (!binary.empty()) options.role_binary = binary;
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status = RunPsBench(options).status();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr(how)) << status;
  EXPECT_LT(seconds, 30) << status;
  EXPECT_TRUE(LiveRoles().empty());
}

TEST(PsBenchProcessesTest, AWorkerThatDiesIsNamedNotWaitedFor) {
  ExpectNamedPromptly("worker1", "worker1 was killed by signal 9 (Killed)");
}

TEST(PsBenchProcessesTest, AShardThatDiesIsNamedNotWaitedFor) {
  ExpectNamedPromptly("ps0", "ps0 was killed by signal 9 (Killed)");
}

TEST(PsBenchProcessesTest, ARoleThatExitsNonZeroIsNamedWithItsCode) {
  ExpectNamedPromptly("", "exited with code 1", "/bin/false");
}

// A role that fails on its own says why, and the bench passes it on with
// the exit status: here every role refuses a token on a transport that
// cannot carry it.
TEST(PsBenchProcessesTest, ARoleThatFailsIsNamedWithWhatItSaid) {
  const std::vector<std::string> known = RegisteredTransports();
  if (std::find(known.begin(), known.end(), "ucx") == known.end()) GTEST_SKIP() << "built without UCX";
  PsBenchOptions options = TinyProcesses("ucx");
  options.security.token = "a-token-ucx-cannot-carry";
  const absl::Status status = RunPsBench(options).status();
  // "ps1 exited with code 1: PS shard 1: INVALID_ARGUMENT: transport 'ucx'
  // cannot carry TLS or a token ..." (whichever role failed first).
  const std::string message(status.message());
  const std::string role = message.substr(0, message.find(' '));
  const std::string said = role.rfind("ps", 0) == 0 ? "PS shard " + role.substr(2) : "worker " + role.substr(6);
  EXPECT_THAT(message, HasSubstr(role + " exited with code 1: " + said + ": ")) << status;
  EXPECT_THAT(message, HasSubstr("cannot carry")) << status;
  EXPECT_TRUE(LiveRoles().empty());
}

// pstrain-bench ps with `flags`: exit code and stderr.
std::pair<int, std::string> RunBench(const std::vector<std::string>& flags, std::vector<std::string> prefix = {}) {
  test::TempDir dir;
  prefix.push_back(test::BinDir() + "/pstrain-bench");
  prefix.push_back("ps");
  prefix.insert(prefix.end(), flags.begin(), flags.end());
  test::Subprocess bench = test::Spawn(prefix, dir.path());
  const std::optional<int> status = test::WaitForExit(bench.pid, std::chrono::seconds(60));
  const int code = status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  return {code, bench.err()};
}

TEST(PsBenchProcessesTest, BadCombinationsExitTwoNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--processes", "--transport", "inproc"}, "--transport inproc"},
      {{"--emulated_hosts", "1"}, "--emulated_hosts must be 2 to"},
      {{"--emulated_hosts", "3", "--workers", "1", "--servers", "1"}, "--emulated_hosts must be 2 to"},
      {{"--processes", "--link_gbps", "1"}, "--link_gbps caps the links of emulated hosts"},
      {{"--processes", "--host_cpus", "own"}, "--host_cpus places emulated hosts"},
  };
  for (const auto& [flags, message] : cases) {
    const auto [code, err] = RunBench(flags);
    EXPECT_EQ(code, 2) << err;
    EXPECT_THAT(err, HasSubstr(message));
  }
}

// Without root there are no emulated hosts: exit 2 saying so, before
// anything starts.
TEST(PsBenchProcessesTest, EmulatedHostsWithoutRootExitTwoSayingWhy) {
  std::vector<std::string> prefix;
  if (geteuid() == 0) {
    if (!test::Exists("/usr/bin/setpriv")) GTEST_SKIP() << "root, and no /usr/bin/setpriv to drop it";
    prefix = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  }
  const auto [code, err] = RunBench({"--emulated_hosts", "2"}, prefix);
  EXPECT_EQ(code, 2) << err;
  EXPECT_THAT(err, HasSubstr("--emulated_hosts 2: emulated hosts need root"));
}

// Shards on host 0, workers on host 1, links capped: the same figures and
// accounting, every byte across the bridge.
TEST(PsBenchProcessesTest, TwoEmulatedHostsGiveTheSameFiguresAndAccounting) {
  if (absl::Status s = launch::CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
  PsBenchOptions options = TinyProcesses("grpc");
  options.emulated_hosts = 2;
  options.link_gbps = 5;
  ExpectSaneRun(options);
  const HostPlacement placement = PlaceOnHosts(options);
  EXPECT_EQ(placement.shard_host, std::vector<int>({0, 0}));
  EXPECT_EQ(placement.worker_host, std::vector<int>({1, 1}));
  // The default (auto): each host on CPUs of its own where there are enough.
  const std::vector<int> cpus = launch::CpusOfThisProcess();
  absl::StatusOr<std::vector<std::vector<int>>> split = launch::SplitCpus(2, cpus);
  const std::string own = split.ok() ? absl::StrCat("CPUs of their own (", launch::CpuListString((*split)[0]), ", ",
                                                    launch::CpuListString((*split)[1]), ")")
                                     : "CPUs shared";
  EXPECT_EQ(DescribeEmulatedHosts(options),
            "emulated hosts: 2 (shards on host 0, workers on host 1), links 5 Gbit/s each way, " + own);
  EXPECT_THAT(FormatPsBenchJson(options, PsBenchResult()),
              HasSubstr(cpus.size() >= 2 ? "\"host_cpus\":\"own\"" : "\"host_cpus\":\"shared\""));
  options.host_cpus = "shared";
  EXPECT_THAT(DescribeEmulatedHosts(options), testing::EndsWith("each way, CPUs shared"));
  EXPECT_THAT(FormatPsBenchJson(options, PsBenchResult()), HasSubstr("\"host_cpus\":\"shared\""));
}

// --host_cpus: a word it does not know, or own CPUs for more hosts than
// there are CPUs, exits 2 naming the flag before anything starts.
TEST(PsBenchProcessesTest, HostCpusThatCannotBeHadExitTwoSayingWhy) {
  if (absl::Status s = launch::CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
  auto [code, err] = RunBench({"--emulated_hosts", "2", "--host_cpus", "mine"});
  EXPECT_EQ(code, 2) << err;
  EXPECT_THAT(err, HasSubstr("--host_cpus must be auto, own or shared, got \"mine\""));
  const int too_many = static_cast<int>(launch::CpusOfThisProcess().size()) + 1;
  std::tie(code, err) = RunBench(
      {"--emulated_hosts", std::to_string(too_many), "--workers", std::to_string(too_many), "--host_cpus", "own"});
  EXPECT_EQ(code, 2) << err;
  EXPECT_THAT(err,
              HasSubstr(absl::StrCat("--host_cpus own: ", too_many, " emulated hosts cannot have CPUs of their own")));
}

TEST(PsBenchProcessesTest, RolesAreSpreadOverTheHosts) {
  PsBenchOptions options;
  options.servers = 2;
  options.workers = 4;
  options.emulated_hosts = 4;  // 4 x 2/6 rounds to 1 shard host
  HostPlacement p = PlaceOnHosts(options);
  EXPECT_EQ(p.shard_host, std::vector<int>({0, 0}));
  EXPECT_EQ(p.worker_host, std::vector<int>({1, 2, 3, 1}));
  options.servers = 4;
  options.workers = 1;
  options.emulated_hosts = 5;  // every shard host but one worker host
  p = PlaceOnHosts(options);
  EXPECT_EQ(p.shard_host, std::vector<int>({0, 1, 2, 3}));
  EXPECT_EQ(p.worker_host, std::vector<int>({4}));
}

}  // namespace
}  // namespace pstrain::bench
