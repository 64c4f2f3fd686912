// The elastic all-reduce with real processes (docs/ELASTIC.md):
// variable_update allreduce over Gloo, data.sharding dynamic, Fashion-MNIST.
//   - 4 of 5 listed workers start; worker 2 is killed with kill -9; the other
//     three go on as a new generation within 10 s of the kill; worker 4 is
//     started then and joins; the run ends by itself with test accuracy
//     >= 0.85, result.json naming the loss and the join, and the group's
//     ledger showing every example of every epoch trained once;
//   - the same loss with every worker on its own emulated host (network
//     namespaces on a bridge, through pstrain-launch; skipped without root),
//     the three going on within 10 s there too. (Workers joining across
//     emulated hosts: the storm test's killed workers, started again by the
//     launcher, tests/integration/storm_test.cc.)
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/metrics/result_json.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/elastic_test_util.h"
#include "tests/util/process_test_util.h"
#include "tools/launch/emulated_hosts.h"

namespace pstrain::test {
namespace {

using std::chrono::seconds;

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

// The default experiment's MLP, `workers` listed, all-reduce over Gloo with
// dynamic sharding; `extra` appended.
std::string ElasticAllReduceConfig(int workers, const std::string& extra) {
  std::vector<std::string> hosts;
  for (int w = 0; w < workers; ++w) hosts.push_back(absl::StrCat("\"localhost:", 3000 + w, "\""));
  return absl::StrCat("cluster: {worker_hosts: [", absl::StrJoin(hosts, ", "), R"(]}
model: {name: mlp, hidden_units: [128, 32]}
data: {source: fashion_mnist, path: ")",
                      kFashionMnist, R"(", sharding: dynamic}
optimizer: {name: momentum, learning_rate: 0.05, lr_schedule: cosine, momentum: 0.9}
train: {batch_size_per_device: 64, epochs: 3, display_every: 50}
variable_update: allreduce
)",
                      extra);
}

bool ExitedZero(const std::optional<int>& status) { return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0; }

class ElasticAllReduceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(absl::StrCat(kFashionMnist, "/train-images-idx3-ubyte.gz"))) {
      GTEST_SKIP() << "Fashion-MNIST is not installed (Debian's dataset-fashion-mnist)";
    }
  }
  TempDir dir_;
};

// Must-show 2: kill -9 of one of 4, the others continue on 3 within 10 s; a
// fifth started then joins; accuracy >= 0.85; every example once.
TEST_F(ElasticAllReduceTest, LosesAWorkerGoesOnWithThreeAndAdmitsAFifth) {
  const std::string config = dir_.path() + "/elastic.yaml";
  const std::string run_dir = dir_.path() + "/run";
  WriteFile(config, ElasticAllReduceConfig(5, "elastic: {min_workers: 3, on_worker_lost: continue}\n"));
  const std::string worker_hosts = FreeLoopbackHosts(5);
  auto start = [&](int index) {
    const std::string capture = dir_.path() + "/worker" + std::to_string(index);
    std::filesystem::create_directories(capture);
    return Spawn({BinDir() + "/pstrain-worker", "--config=" + config, absl::StrCat("--index=", index),
                  "--worker_hosts=" + worker_hosts, "--run_dir=" + run_dir},
                 capture);
  };
  std::vector<Subprocess> workers;
  for (int w = 0; w < 4; ++w) workers.push_back(start(w));
  Subprocess& chief = workers[0];
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(chief.out(), "\n200\t"); }, seconds(120)))
      << chief.out() << chief.err();
  ASSERT_EQ(kill(workers[2].pid, SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(chief.out(), "continuing at step"); }, seconds(30)))
      << chief.out() << chief.err();
  const auto regrouped = std::chrono::steady_clock::now();
  const double seconds_to_continue = std::chrono::duration<double>(regrouped - killed).count();
  std::cout << "the three went on " << seconds_to_continue << " s after the kill" << std::endl;
  EXPECT_LT(seconds_to_continue, 10.0) << chief.out();
  // The fifth's start-up (the data set, the model) took over a minute beside
  // other tests, when the run ended before it asked to join. Workers 1 and 3
  // stop (SIGSTOP) until it has asked, holding the chief inside its step (its
  // store still answers), so the join is at a step under way on any machine.
  for (int w : {1, 3}) kill(workers[w].pid, SIGSTOP);
  Subprocess joiner = start(4);
  const bool asked =
      WaitUntil([&] { return absl::StrContains(joiner.out(), "asked to join the run") || !ProcessAlive(joiner.pid); },
                seconds(90));
  for (int w : {1, 3}) kill(workers[w].pid, SIGCONT);
  ASSERT_TRUE(asked && ProcessAlive(joiner.pid)) << joiner.out() << joiner.err();
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(joiner.out(), "joining the run at step"); }, seconds(60)))
      << joiner.out() << joiner.err() << chief.out();
  for (Subprocess* p : {&workers[0], &workers[1], &workers[3], &joiner}) {
    EXPECT_TRUE(ExitedZero(WaitForExit(p->pid, seconds(300)))) << p->out() << p->err();
  }
  WaitForExit(workers[2].pid, seconds(5));
  std::cout << chief.out().substr(chief.out().find("elastic: generation")) << std::endl;
  absl::StatusOr<RunResult> result = ReadResultJson(run_dir + "/result.json");
  ASSERT_TRUE(result.ok()) << result.status() << chief.out();
  EXPECT_GE(result->test_accuracy(), 0.85) << chief.out();
  EXPECT_TRUE(HasChange(*result, 2, "lost")) << result->ShortDebugString();
  EXPECT_TRUE(HasChange(*result, 4, "joined")) << result->ShortDebugString();
  ExpectEveryExampleOnce(result->data_ledger());
  ASSERT_EQ(result->data_ledger().examples_by_worker_size(), 5);
  EXPECT_GT(result->data_ledger().examples_by_worker(4), 0);
  // Worker 2 trained until it was killed; what it had not committed the
  // others trained.
  EXPECT_GT(result->data_ledger().examples_by_worker(2), 0);
  EXPECT_LT(result->data_ledger().examples_by_worker(2), result->data_ledger().examples_by_worker(0));
}

// The same loss with every worker on an emulated host of its own, started
// by pstrain-launch.
TEST_F(ElasticAllReduceTest, LosesAWorkerBetweenEmulatedHosts) {
  if (absl::Status s = launch::CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
  const std::string config = dir_.path() + "/hosts.yaml";
  const std::string run_dir = dir_.path() + "/hosts";
  WriteFile(config, ElasticAllReduceConfig(4,
                                           "elastic: {min_workers: 3, on_worker_lost: continue}\n"
                                           "emulation: {workers_per_host: 1}\n"));
  Subprocess launch =
      Spawn({BinDir() + "/pstrain-launch", config, "--run_dir", run_dir, "--timeout_s", "400"}, dir_.path());
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(launch.out(), "[worker2] 200\timages/sec"); }, seconds(120)))
      << launch.out() << launch.err();
  const std::vector<pid_t> pids = FindProcesses({"pstrain-worker", "--index=2", run_dir});
  ASSERT_EQ(pids.size(), 1u);
  ASSERT_EQ(kill(pids[0], SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      WaitUntil([&] { return absl::StrContains(launch.out(), "[worker0] worker 0: continuing at step"); }, seconds(30)))
      << launch.out() << launch.err();
  const double seconds_to_continue = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::cout << "between hosts, the three went on " << seconds_to_continue << " s after the kill" << std::endl;
  EXPECT_LT(seconds_to_continue, 10.0) << launch.out();
  const std::optional<int> status = WaitForExit(launch.pid, seconds(420));
  const std::string output = launch.out() + launch.err();
  ASSERT_TRUE(ExitedZero(status)) << output;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StrContains(line, "elastic: ") || absl::StrContains(line, "membership: ") ||
        absl::StrContains(line, "Accuracy") || absl::StrContains(line, "launch: ")) {
      std::cout << line << "\n";
    }
  }
  EXPECT_TRUE(absl::StrContains(output, "the run goes on without it")) << output;
  absl::StatusOr<RunResult> result = ReadResultJson(run_dir + "/result.json");
  ASSERT_TRUE(result.ok()) << result.status() << output;
  EXPECT_GE(result->test_accuracy(), 0.85) << output;
  EXPECT_TRUE(HasChange(*result, 2, "lost")) << result->ShortDebugString();
  ExpectEveryExampleOnce(result->data_ledger());
}

}  // namespace
}  // namespace pstrain::test
