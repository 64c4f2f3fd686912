// RunParameterServer (ps/ps_runner.h) over real transports: exits OK when
// every worker is done, and exits with an error naming the worker when one is
// lost in sync mode -- also while other workers' pulls are parked. An async
// pull taken while another worker's pushes land is one whole value, never
// bytes of two (over grpc, pulls through the lane are lent: read in place).
#include "ps/ps_runner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/transport/grpc/grpc_transport.h"
#include "common/transport/inproc/inproc_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ps/ps_test_util.h"

namespace pstrain {
namespace {

using ::pstrain::ps_testing::AddTensor;
using ::pstrain::ps_testing::FloatBytes;
using ::testing::HasSubstr;

int UnusedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

ExperimentConfig Config(const std::string& ps_address, int num_workers, const std::string& consistency,
                        float worker_lost_seconds) {
  ExperimentConfig config;
  config.mutable_cluster()->add_ps_hosts(ps_address);
  for (int w = 0; w < num_workers; ++w) config.mutable_cluster()->add_worker_hosts(absl::StrCat("worker", w, ":1"));
  config.set_consistency(consistency);
  config.mutable_optimizer()->set_name("sgd");
  config.mutable_optimizer()->set_learning_rate(0.5f);
  TimeoutConfig* t = config.mutable_timeouts();
  t->set_rpc_seconds(30);
  t->set_heartbeat_seconds(0.1f);
  t->set_worker_lost_seconds(worker_lost_seconds);
  t->set_startup_seconds(30);
  t->set_sync_step_seconds(30);
  return config;
}

CallOptions Opts(absl::Duration d = absl::Seconds(10)) {
  CallOptions o;
  o.deadline = absl::Now() + d;
  o.wait_for_ready = true;
  return o;
}

absl::Status Init(Channel* channel) {
  InitRequest header;
  header.set_worker(0);
  AddTensor(header.add_tensors(), "w", {2}, 8);
  OutgoingFrame f = OutgoingFrame::FromHeader(header);
  f.chunks = ps_testing::Chunks(FloatBytes({1.0f, 2.0f}), {});
  return channel->CallSync("Init", std::move(f), Opts(), nullptr);
}

absl::Status Push(Channel* channel, int worker, int64_t step) {
  PushRequest header;
  header.set_worker(worker);
  header.set_step(step);
  AddTensor(header.add_tensors(), "w", {2}, 8);
  OutgoingFrame f = OutgoingFrame::FromHeader(header);
  f.chunks = ps_testing::Chunks(FloatBytes({0.5f, 0.5f}), {});
  return channel->CallSync("Push", std::move(f), Opts(), nullptr);
}

absl::Status Heartbeat(Channel* channel, int worker) {
  HeartbeatRequest header;
  header.set_worker(worker);
  return channel->CallSync("Heartbeat", OutgoingFrame::FromHeader(header), Opts(), nullptr);
}

absl::Status Done(Channel* channel, int worker) {
  DoneRequest header;
  header.mutable_report()->set_worker(worker);
  header.mutable_report()->set_steps(1);
  return channel->CallSync("Done", OutgoingFrame::FromHeader(header), Opts(), nullptr);
}

struct Runner {
  std::atomic<bool> finished{false};
  absl::Status status;
  StatsResponse stats;
  std::thread thread;

  void Start(const ExperimentConfig& config, Transport* transport, const std::string& listen) {
    thread = std::thread([this, config, transport, listen] {
      PsRunOptions options;
      options.listen_address = listen;
      options.final_stats = &stats;
      status = RunParameterServer(config, 0, transport, options);
      finished = true;
    });
  }
};

class PsRunnerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "grpc") {
      transport_ = CreateGrpcTransport(TransportOptions());
      int port = UnusedPort();
      listen_ = absl::StrCat("127.0.0.1:", port);
      connect_ = listen_;
    } else {
      transport_ = std::make_unique<InprocTransport>();
      listen_ = connect_ = "ps0:1";
    }
  }

  std::unique_ptr<Channel> Connect() {
    absl::StatusOr<std::unique_ptr<Channel>> c = transport_->Connect(connect_);
    EXPECT_TRUE(c.ok());
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Waits until the PS serves, so the first connection attempt succeeds
  // (no gRPC reconnect back-off; inproc ignores wait_for_ready).
  void WaitServing() {
    if (GetParam() == "grpc") {
      const int port = std::stoi(listen_.substr(listen_.rfind(':') + 1));
      for (int i = 0; i < 2000; ++i) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(port);
        bool up = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
        close(fd);
        if (up) return;
        absl::SleepFor(absl::Milliseconds(5));
      }
      return;
    }
    std::unique_ptr<Channel> probe = Connect();
    for (int i = 0; i < 2000; ++i) {
      HeartbeatRequest h;
      h.set_worker(0);
      absl::Status s = probe->CallSync("Heartbeat", OutgoingFrame::FromHeader(h), Opts(), nullptr);
      if (s.code() != absl::StatusCode::kUnavailable) return;
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  std::unique_ptr<Transport> transport_;
  std::string listen_, connect_;
};

TEST_P(PsRunnerTest, ExitsOkWhenEveryWorkerIsDone) {
  ExperimentConfig config = Config(listen_, 2, "sync", /*worker_lost_seconds=*/30);
  Runner runner;
  runner.Start(config, transport_.get(), listen_);
  WaitServing();
  std::unique_ptr<Channel> channel = Connect();
  ASSERT_TRUE(Init(channel.get()).ok());
  ASSERT_TRUE(Push(channel.get(), 0, 0).ok());
  ASSERT_TRUE(Push(channel.get(), 1, 0).ok());
  ASSERT_TRUE(Done(channel.get(), 0).ok());
  ASSERT_TRUE(Done(channel.get(), 1).ok());
  bool finished = ps_testing::WaitUntil([&] { return runner.finished.load(); }, absl::Seconds(8));
  if (!finished) {
    ADD_FAILURE() << "RunParameterServer did not return after every worker was done";
    runner.thread.detach();
    return;
  }
  runner.thread.join();
  EXPECT_TRUE(runner.status.ok()) << runner.status;
  EXPECT_EQ(runner.stats.done_size(), 2);
  EXPECT_EQ(runner.stats.load().applied_updates(), 1);
}

// Calls that do not wait for the server to come up: once a lane is
// attached, they go through it (grpc_shm.h).
CallOptions LaneOpts() {
  CallOptions o = Opts();
  o.wait_for_ready = false;
  return o;
}

// A pull's values (one variable of `n` floats): every element, or the error.
absl::StatusOr<std::vector<float>> PullValues(Channel* channel, int worker, size_t n) {
  PullRequest header;
  header.set_worker(worker);
  IncomingFrame response;
  absl::Status s = channel->CallSync("Pull", OutgoingFrame::FromHeader(header), LaneOpts(), &response);
  if (!s.ok()) return s;
  std::vector<float> values(n);
  if (absl::Status r = response.Read(values.data(), n * sizeof(float)); !r.ok()) return r;
  return values;
}

absl::Status PushConstant(Channel* channel, int worker, int64_t step, size_t n, float g) {
  PushRequest header;
  header.set_worker(worker);
  header.set_step(step);
  AddTensor(header.add_tensors(), "w", {static_cast<int64_t>(n)}, n * sizeof(float));
  OutgoingFrame f = OutgoingFrame::FromHeader(header);
  f.chunks = ps_testing::Chunks(FloatBytes(std::vector<float>(n, g)), {});
  return channel->CallSync("Push", std::move(f), LaneOpts(), nullptr);
}

TEST_P(PsRunnerTest, AsyncPullsUnderPushesAreWholeValues) {
  constexpr size_t kFloats = size_t{1} << 18;  // 1 MiB: a lane's size, lent through it over grpc
  ExperimentConfig config = Config(listen_, 2, "async", /*worker_lost_seconds=*/30);
  Runner runner;
  runner.Start(config, transport_.get(), listen_);
  WaitServing();
  std::unique_ptr<Channel> pusher = Connect(), puller = Connect();
  InitRequest init;
  init.set_worker(0);
  AddTensor(init.add_tensors(), "w", {static_cast<int64_t>(kFloats)}, kFloats * sizeof(float));
  OutgoingFrame f = OutgoingFrame::FromHeader(init);
  f.chunks = ps_testing::Chunks(FloatBytes(std::vector<float>(kFloats, 1.0f)), {});
  ASSERT_TRUE(pusher->CallSync("Init", std::move(f), Opts(), nullptr).ok());
  // Every update moves every element alike (lr 0.5 x 2^-11, exact in float),
  // so a whole value has all its elements equal.
  std::atomic<bool> stop{false};
  std::thread pushes([&] {
    for (int64_t step = 0; !stop.load(); ++step) {
      if (!PushConstant(pusher.get(), 0, step, kFloats, 1.0f / 1024).ok()) return;
    }
  });
  ASSERT_TRUE(PushConstant(puller.get(), 1, 0, kFloats, 0.0f).ok());  // a large frame: the lane attaches
  int changes = 0, pulls = 0;
  float last = 1.0f;
  const absl::Time until = absl::Now() + absl::Seconds(3);
  for (; absl::Now() < until || changes < 10; ++pulls) {
    absl::StatusOr<std::vector<float>> values = PullValues(puller.get(), 1, kFloats);
    ASSERT_TRUE(values.ok()) << values.status();
    const float first = values->front();
    const auto other = std::find_if(values->begin(), values->end(), [&](float v) { return v != first; });
    ASSERT_EQ(other, values->end()) << "pull " << pulls << ": element 0 is " << first << ", element "
                                    << (other - values->begin()) << " is " << *other;
    changes += first != last ? 1 : 0;
    last = first;
    if (absl::Now() > until + absl::Seconds(30)) break;
  }
  stop = true;
  pushes.join();
  EXPECT_GE(changes, 10) << "the pulls did not see the pushes land (" << pulls << " pulls)";
  ASSERT_TRUE(Done(pusher.get(), 0).ok());
  ASSERT_TRUE(Done(puller.get(), 1).ok());
  ASSERT_TRUE(ps_testing::WaitUntil([&] { return runner.finished.load(); }, absl::Seconds(30)));
  runner.thread.join();
  EXPECT_TRUE(runner.status.ok()) << runner.status;
}

TEST_P(PsRunnerTest, SyncLostWorkerIsAnErrorNamingIt) {
  ExperimentConfig config = Config(listen_, 2, "sync", /*worker_lost_seconds=*/0.5f);
  Runner runner;
  runner.Start(config, transport_.get(), listen_);
  WaitServing();
  std::unique_ptr<Channel> channel = Connect();
  ASSERT_TRUE(Init(channel.get()).ok());
  ASSERT_TRUE(Heartbeat(channel.get(), 1).ok());
  // Worker 0 keeps beating and finishes; worker 1 goes silent.
  ASSERT_TRUE(Done(channel.get(), 0).ok());
  bool finished = ps_testing::WaitUntil([&] { return runner.finished.load(); }, absl::Seconds(8));
  if (!finished) {
    ADD_FAILURE() << "RunParameterServer did not notice the lost worker";
    runner.thread.detach();
    return;
  }
  runner.thread.join();
  EXPECT_EQ(runner.status.code(), absl::StatusCode::kUnavailable) << runner.status;
  EXPECT_THAT(std::string(runner.status.message()), HasSubstr("worker 1"));
}

// The PS must exit (non-zero) when a sync worker is lost even though another
// worker's pull for the next version is parked on the shard. Run in a child
// process: if the PS hangs in server shutdown, the child exits with code 3
// instead of wedging this test binary.
TEST_P(PsRunnerTest, SyncLostWorkerExitsWhilePullIsParked) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string kind = GetParam();
  auto scenario = [this] {
    ExperimentConfig config = Config(listen_, 2, "sync", /*worker_lost_seconds=*/1.0f);
    Runner runner;
    runner.Start(config, transport_.get(), listen_);
    WaitServing();
    std::unique_ptr<Channel> channel = Connect();
    if (!Init(channel.get()).ok()) _exit(10);
    if (!Heartbeat(channel.get(), 1).ok()) _exit(11);
    if (!Push(channel.get(), 0, 0).ok()) _exit(12);
    // Worker 0 waits for version 1, which needs worker 1's gradient.
    PullRequest pull;
    pull.set_worker(0);
    pull.set_min_version(1);
    pull.set_timeout_ms(60000);
    std::atomic<bool> pull_done{false};
    CallOptions options;
    options.deadline = absl::Now() + absl::Seconds(60);
    channel->Call("Pull", OutgoingFrame::FromHeader(pull), options,
                  [&pull_done](absl::Status, IncomingFrame) { pull_done = true; });
    // Keep worker 0 alive; worker 1 is silent and gets lost after 1 s.
    for (int i = 0; i < 60 && !runner.finished.load(); ++i) {
      Heartbeat(channel.get(), 0).IgnoreError();
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (!runner.finished.load()) {
      std::fprintf(stderr, "RunParameterServer still running 6 s after worker 1 went silent (a pull parked)\n");
      std::fflush(stderr);
      _exit(3);
    }
    runner.thread.join();
    if (runner.status.code() != absl::StatusCode::kUnavailable) _exit(4);
    if (std::string(runner.status.message()).find("worker 1") == std::string::npos) _exit(5);
    // The parked pull was answered (not left hanging) once the PS stopped.
    for (int i = 0; i < 100 && !pull_done.load(); ++i) absl::SleepFor(absl::Milliseconds(20));
    if (!pull_done.load()) _exit(6);
    _exit(0);
  };
  EXPECT_EXIT(scenario(), ::testing::ExitedWithCode(0), "") << kind;
}

INSTANTIATE_TEST_SUITE_P(Transports, PsRunnerTest, ::testing::Values("grpc", "inproc"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace pstrain
