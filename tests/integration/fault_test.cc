// Failures with real processes: a lost worker, a lost PS, bad configs,
// malformed pushes, over every real transport of the build (grpc, and ucx
// where built). Nothing may hang: every wait here has a deadline well above
// the product's own (worker_lost_seconds: 5).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/transport/transport.h"
#include "gtest/gtest.h"
#include "proto/ps.pb.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/util/process_test_util.h"

namespace pstrain::test {
namespace {

using std::chrono::seconds;

bool Exited(const std::optional<int>& status, int code) {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == code;
}
bool ExitedNonZero(const std::optional<int>& status) {
  return status && ((WIFEXITED(*status) && WEXITSTATUS(*status) != 0) || WIFSIGNALED(*status));
}

// The transports that cross process boundaries in this build.
std::vector<std::string> RealTransports() {
  std::vector<std::string> transports = {"grpc"};
  if (TransportRegistry().Contains("ucx")) transports.push_back("ucx");
  return transports;
}

std::string TransportName(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

class ClusterProcessTest : public ::testing::TestWithParam<std::string> {
 protected:
  // kEndlessSyncConfig over this test's transport, with `timeouts` in
  // place of its timeouts when given, written to a file.
  std::string EndlessSyncConfig(const std::string& timeouts = "") {
    const std::string config = dir_ / "endless.yaml";
    std::string yaml = kEndlessSyncConfig;
    if (!timeouts.empty()) {
      const size_t at = yaml.find("timeouts: {");
      yaml.replace(at, yaml.find('\n', at) - at, "timeouts: {" + timeouts + "}");
    }
    WriteFile(config, absl::StrCat(yaml, "transport: ", GetParam(), "\n"));
    return config;
  }

  // Starts 1 PS + 2 workers with `config`, kills the PS once worker 1 made
  // progress, and waits for both workers, which must exit non-zero within
  // their deadlines naming the shard. Returns the two workers.
  std::vector<Subprocess> KillThePsUnderTwoWorkers(const std::string& config) {
    const std::string ps_hosts = FreeLoopbackHosts(1), worker_hosts = FreeLoopbackHosts(2);
    Subprocess ps = StartRole("pstrain-ps", 0, config, ps_hosts, worker_hosts);
    std::vector<Subprocess> workers = {StartRole("pstrain-worker", 0, config, ps_hosts, worker_hosts),
                                       StartRole("pstrain-worker", 1, config, ps_hosts, worker_hosts)};
    if (!WaitUntil([&] { return absl::StrContains(workers[1].out(), "images/sec"); }, seconds(60))) {
      ADD_FAILURE() << "worker 1 never made progress:\n" << workers[1].err() << "\nPS:\n" << ps.err();
      return {};
    }
    kill(ps.pid, SIGKILL);
    const auto killed = std::chrono::steady_clock::now();
    WaitForExit(ps.pid, seconds(5));
    for (Subprocess& worker : workers) {
      std::optional<int> status = WaitForExit(worker.pid, seconds(90));
      slowest_worker_exit_ = std::max(slowest_worker_exit_, std::chrono::steady_clock::now() - killed);
      EXPECT_TRUE(status.has_value()) << "a worker hung after its PS died:\n" << worker.err();
      EXPECT_TRUE(ExitedNonZero(status));
      EXPECT_TRUE(absl::StrContains(worker.err(), "PS shard 0")) << worker.err();
    }
    return workers;
  }

  Subprocess StartRole(const std::string& binary, int index, const std::string& config, const std::string& ps_hosts,
                       const std::string& worker_hosts) {
    const std::string capture = dir_ / absl::StrCat(binary, index);
    std::filesystem::create_directories(capture);
    return Spawn({BinDir() + "/" + binary, "--config=" + config, absl::StrCat("--index=", index),
                  "--ps_hosts=" + ps_hosts, "--worker_hosts=" + worker_hosts},
                 capture);
  }
  TempDir dir_;
  // KillThePsUnderTwoWorkers: from the kill to the last worker's exit.
  std::chrono::steady_clock::duration slowest_worker_exit_{};
};

TEST_P(ClusterProcessTest, KilledWorkerMakesSyncPsExitNamingIt) {
  const std::string config = EndlessSyncConfig();
  const std::string ps_hosts = FreeLoopbackHosts(1), worker_hosts = FreeLoopbackHosts(2);
  Subprocess ps = StartRole("pstrain-ps", 0, config, ps_hosts, worker_hosts);
  Subprocess chief = StartRole("pstrain-worker", 0, config, ps_hosts, worker_hosts);
  Subprocess victim = StartRole("pstrain-worker", 1, config, ps_hosts, worker_hosts);

  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(victim.out(), "images/sec"); }, seconds(60)))
      << "worker 1 never made progress:\n"
      << victim.err() << "\nPS:\n"
      << ps.err();
  kill(victim.pid, SIGKILL);
  WaitForExit(victim.pid, seconds(5));

  // worker_lost_seconds is 5: the PS must notice and exit well within 30 s.
  std::optional<int> ps_status = WaitForExit(ps.pid, seconds(30));
  ASSERT_TRUE(ps_status.has_value()) << "PS did not exit after worker 1 died:\n" << ps.err();
  EXPECT_TRUE(ExitedNonZero(ps_status));
  EXPECT_TRUE(absl::StrContains(ps.err(), "worker 1")) << ps.err();
  // The chief is alive and heartbeating: blaming it too is wrong.
  EXPECT_FALSE(absl::StrContains(ps.err(), "worker 0 lost")) << "the live chief was named lost\nPS:\n"
                                                             << ps.err() << "\nchief:\n"
                                                             << chief.err();

  // The chief cannot go on without its PS: it fails too, within its deadline.
  std::optional<int> chief_status = WaitForExit(chief.pid, seconds(90));
  ASSERT_TRUE(chief_status.has_value()) << "chief hung after its PS exited:\n" << chief.err();
  EXPECT_TRUE(ExitedNonZero(chief_status));
}

// A PS shard that dies: every worker exits non-zero naming the shard, within
// its deadlines (it does not wait for a step that can never complete).
TEST_P(ClusterProcessTest, KilledPsMakesEveryWorkerExitNamingTheShard) {
  EXPECT_EQ(KillThePsUnderTwoWorkers(EndlessSyncConfig()).size(), 2u);
}

TEST_P(ClusterProcessTest, WorkersWaitingForADeadPsGiveUpAfterPsRecoverSecondsNamingIt) {
  const std::vector<Subprocess> workers = KillThePsUnderTwoWorkers(
      EndlessSyncConfig("heartbeat_seconds: 0.5, worker_lost_seconds: 5, sync_step_seconds: 60, rpc_seconds: 60, "
                        "ps_recover_seconds: 3"));
  ASSERT_EQ(workers.size(), 2u);
  // 3 s to recover, not 3 s plus the 60 s a reachable shard gets to answer.
  EXPECT_LT(slowest_worker_exit_, seconds(30)) << "the workers waited for a dead PS beyond ps_recover_seconds";
  for (const Subprocess& worker : workers) {
    EXPECT_TRUE(absl::StrContains(worker.out(), "for the parameter servers to recover")) << worker.out();
    EXPECT_TRUE(absl::StrContains(worker.err(), "recovery after \"")) << worker.err();
  }
}

TEST_P(ClusterProcessTest, LauncherStopsEveryRoleWhenAWorkerDies) {
  const std::string config = EndlessSyncConfig();
  const std::string run_dir = dir_ / "run";
  Subprocess launch = Spawn({BinDir() + "/pstrain-launch", config, "--run_dir", run_dir}, dir_.path());

  std::vector<pid_t> victims;
  ASSERT_TRUE(WaitUntil(
      [&] {
        victims = FindProcesses({"pstrain-worker", "--index=1", run_dir});
        return !victims.empty() && absl::StrContains(launch.out(), "images/sec");
      },
      seconds(60)))
      << launch.out();
  kill(victims[0], SIGKILL);

  std::optional<int> status = WaitForExit(launch.pid, seconds(60));
  ASSERT_TRUE(status.has_value()) << "launcher did not stop:\n" << launch.out();
  EXPECT_TRUE(Exited(status, 1)) << launch.out();
  EXPECT_TRUE(absl::StrContains(launch.out(), "worker1")) << launch.out();
  EXPECT_TRUE(FindProcesses({"pstrain-", run_dir}).empty()) << "orphan role processes remain";
}

INSTANTIATE_TEST_SUITE_P(Transports, ClusterProcessTest, ::testing::ValuesIn(RealTransports()), TransportName);

struct BadConfigCase {
  const char* name;
  const char* yaml;
  const char* field;  // must appear in the message
};

const BadConfigCase kBadConfigs[] = {
    {"BatchZero",
     "cluster: {ps_hosts: ['localhost:1'], worker_hosts: ['localhost:2']}\ntrain: {batch_size_per_device: 0}\n",
     "train.batch_size_per_device"},
    {"UnknownField", "cluster: {ps_hosts: ['localhost:1'], worker_hosts: ['localhost:2']}\ntrain: {batch: 3}\n",
     "train.batch"},
    {"NoWorkers", "cluster: {ps_hosts: ['localhost:1']}\n", "worker_hosts"},
    {"MalformedHost", "cluster: {ps_hosts: ['localhost'], worker_hosts: ['localhost:2']}\n", "cluster.ps_hosts"},
    {"WrongType",
     "cluster: {ps_hosts: ['localhost:1'], worker_hosts: ['localhost:2']}\noptimizer: {learning_rate: fast}\n",
     "optimizer.learning_rate"},
    {"UnreadableData",
     "cluster: {ps_hosts: ['localhost:1'], worker_hosts: ['localhost:2']}\ndata: {path: /nonexistent}\n", "data.path"},
};

void PrintTo(const BadConfigCase& c, std::ostream* os) { *os << c.name; }

class BadConfigTest : public ::testing::TestWithParam<BadConfigCase> {};

TEST_P(BadConfigTest, RolesExitTwoNamingTheField) {
  TempDir dir;
  const std::string config = dir / "bad.yaml";
  WriteFile(config, GetParam().yaml);
  for (const char* binary : {"pstrain-worker", "pstrain-ps"}) {
    // The PS never reads data, so it does not check the data path.
    if (std::strcmp(binary, "pstrain-ps") == 0 && std::strcmp(GetParam().name, "UnreadableData") == 0) continue;
    std::filesystem::create_directories(dir / binary);
    Subprocess role = Spawn({BinDir() + "/" + binary, "--config=" + config, "--index=0"}, dir / binary);
    std::optional<int> status = WaitForExit(role.pid, seconds(30));
    EXPECT_TRUE(Exited(status, 2)) << binary << ": " << role.err();
    EXPECT_TRUE(absl::StrContains(role.err(), GetParam().field)) << binary << ": " << role.err();
    EXPECT_TRUE(absl::StrContains(role.err(), "bad.yaml")) << binary << ": " << role.err();
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, BadConfigTest, ::testing::ValuesIn(kBadConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(BadConfigLaunchTest, LauncherExitsTwoAndStartsNothingThatSurvives) {
  TempDir dir;
  const std::string config = dir / "bad.yaml";
  WriteFile(config, kBadConfigs[0].yaml);
  Subprocess launch = Spawn({BinDir() + "/pstrain-launch", config, "--run_dir", dir / "run"}, dir.path());
  std::optional<int> status = WaitForExit(launch.pid, seconds(60));
  EXPECT_TRUE(Exited(status, 2)) << launch.out() << launch.err();
  EXPECT_TRUE(absl::StrContains(launch.out() + launch.err(), "train.batch_size_per_device"));
  EXPECT_TRUE(FindProcesses({"pstrain-", dir / "run"}).empty());
}

TEST(BadFlagsTest, MalformedHostFlagExitsTwo) {
  TempDir dir;
  Subprocess role =
      Spawn({BinDir() + "/pstrain-worker", "--config=" + SourcePath("configs/fashion_mnist_mlp_sync.yaml"), "--index=0",
             "--ps_hosts=localhost:99999"},
            dir.path());
  std::optional<int> status = WaitForExit(role.pid, seconds(30));
  EXPECT_TRUE(Exited(status, 2)) << role.err();
  EXPECT_TRUE(absl::StrContains(role.err(), "99999")) << role.err();
}

// A PS whose port another process holds says so in one line, naming the
// address and the cause, and exits non-zero (gRPC's own lines kept out).
TEST(BadFlagsTest, APsOnATakenPortSaysSoInOneLine) {
  const int holder = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string port = std::to_string(ntohs(address.sin_port));
  TempDir dir;
  Subprocess ps = Spawn({BinDir() + "/pstrain-ps", "--config=" + SourcePath("configs/fashion_mnist_mlp_sync.yaml"),
                         "--index=0", "--ps_hosts=localhost:" + port, "--worker_hosts=localhost:1"},
                        dir.path());
  std::optional<int> status = WaitForExit(ps.pid, seconds(60));
  close(holder);
  EXPECT_TRUE(ExitedNonZero(status)) << ps.err();
  const std::string printed = ps.out() + ps.err();
  EXPECT_EQ(std::count(printed.begin(), printed.end(), '\n'), 1) << printed;
  EXPECT_TRUE(absl::StrContains(printed, ":" + port + ": address in use")) << printed;
}

// ---- A real PS process, driven by hand-made requests over gRPC. ----

class MalformedPushTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string config = dir_ / "one.yaml";
    WriteFile(config, absl::StrCat(R"(
cluster: {ps_hosts: ["localhost:1"], worker_hosts: ["localhost:2"]}
data: {source: synthetic}
optimizer: {name: sgd, learning_rate: 0.5}
consistency: sync
transport: )",
                                   GetParam(), "\n"));
    hosts_ = FreeLoopbackHosts(1);
    ps_ = Spawn({BinDir() + "/pstrain-ps", "--config=" + config, "--index=0", "--ps_hosts=" + hosts_,
                 "--worker_hosts=localhost:2"},
                dir_.path());
    transport_ = *CreateTransport(GetParam(), {});
    channel_ = *transport_->Connect(hosts_);
    InitRequest init;
    AddTensor(&init.add_tensors()[0], "w", {2, 2}, 16);
    OutgoingFrame frame = OutgoingFrame::FromHeader(init);
    frame.chunks.push_back(Floats({1, 2, 3, 4}));
    CallOptions options{absl::Now() + absl::Seconds(30), /*wait_for_ready=*/true, /*receive_into=*/{}};
    ASSERT_TRUE(channel_->CallSync("Init", std::move(frame), options, nullptr).ok()) << ps_.err();
  }

  void TearDown() override {
    DoneRequest done;
    done.mutable_report()->set_worker(0);
    channel_->CallSync("Done", OutgoingFrame::FromHeader(done), Options(), nullptr).IgnoreError();
    std::optional<int> status = WaitForExit(ps_.pid, seconds(30));
    EXPECT_TRUE(Exited(status, 0)) << "PS should exit 0 once its only worker is done:\n" << ps_.err();
  }

  static void AddTensor(TensorHeader* h, const std::string& name, std::vector<int64_t> shape, uint64_t bytes) {
    h->set_name(name);
    for (int64_t d : shape) h->add_shape(d);
    h->set_num_bytes(bytes);
  }
  static ConstChunk Floats(std::vector<float> values) {
    auto owned = std::make_shared<std::vector<float>>(std::move(values));
    return {owned->data(), owned->size() * sizeof(float), owned};
  }
  static CallOptions Options() { return {absl::Now() + absl::Seconds(30), false, {}}; }

  absl::Status Push(const std::string& name, std::vector<int64_t> shape, uint64_t declared_bytes,
                    std::vector<float> payload, int64_t step = 0) {
    PushRequest push;
    push.set_worker(0);
    push.set_step(step);
    AddTensor(push.add_tensors(), name, std::move(shape), declared_bytes);
    OutgoingFrame frame = OutgoingFrame::FromHeader(push);
    frame.chunks.push_back(Floats(std::move(payload)));
    return channel_->CallSync("Push", std::move(frame), Options(), nullptr);
  }

  std::vector<float> PullW(int64_t* version) {
    PullRequest pull;
    pull.set_worker(0);
    pull.add_names("w");
    IncomingFrame response;
    absl::Status s = channel_->CallSync("Pull", OutgoingFrame::FromHeader(pull), Options(), &response);
    EXPECT_TRUE(s.ok()) << s;
    PullResponse header;
    EXPECT_TRUE(response.ParseHeader(&header));
    std::vector<float> values(4);
    EXPECT_TRUE(response.Read(values.data(), 16).ok());
    *version = header.versions_size() > 0 ? header.versions(0) : -1;
    return values;
  }

  TempDir dir_;
  std::string hosts_;
  Subprocess ps_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Channel> channel_;
};

TEST_P(MalformedPushTest, RejectedWithInvalidArgumentAndVariableUnchanged) {
  const std::vector<float> initial = {1, 2, 3, 4};
  struct Bad {
    const char* what;
    absl::Status status;
  };
  std::vector<Bad> bad = {
      {"byte count below the shape", Push("w", {2, 2}, 12, {1, 1, 1})},
      {"payload shorter than declared", Push("w", {2, 2}, 16, {1, 1})},
      {"payload longer than declared", Push("w", {2, 2}, 16, {1, 1, 1, 1, 1})},
      {"unknown variable", Push("nope", {2, 2}, 16, {1, 1, 1, 1})},
      {"wrong shape", Push("w", {4}, 16, {1, 1, 1, 1})},
      {"future step", Push("w", {2, 2}, 16, {1, 1, 1, 1}, /*step=*/5)},
  };
  for (const Bad& b : bad) {
    EXPECT_EQ(b.status.code(), absl::StatusCode::kInvalidArgument) << b.what << ": " << b.status;
  }
  int64_t version = -1;
  EXPECT_EQ(PullW(&version), initial);
  EXPECT_EQ(version, 0);

  // A well-formed push still works afterwards: w - 0.5 * g.
  ASSERT_TRUE(Push("w", {2, 2}, 16, {2, 2, 2, 2}).ok());
  EXPECT_EQ(PullW(&version), std::vector<float>({0, 1, 2, 3}));
  EXPECT_EQ(version, 1);
}

TEST_P(MalformedPushTest, UnknownMethodAndGarbageHeaderAreRejected) {
  IncomingFrame response;
  absl::Status s = channel_->CallSync("Explode", OutgoingFrame::FromHeader(PullRequest()), Options(), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  OutgoingFrame garbage;
  garbage.header = std::string("\xff\xff\xff\xff", 4);
  s = channel_->CallSync("Push", std::move(garbage), Options(), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  int64_t version = -1;
  EXPECT_EQ(PullW(&version), std::vector<float>({1, 2, 3, 4}));
}

INSTANTIATE_TEST_SUITE_P(Transports, MalformedPushTest, ::testing::ValuesIn(RealTransports()), TransportName);

}  // namespace
}  // namespace pstrain::test
