// Elastic training with real processes (docs/ELASTIC.md): a worker killed
// for good (sync with on_worker_lost continue, async, ssp), a worker joining
// a run under way, and an async worker stopped twice; with data.sharding
// dynamic, the ledger must show every example of every epoch, the last
// included, trained exactly once.
// Real pstrain-ps/pstrain-worker processes, gRPC, Fashion-MNIST; the first
// test also runs with every role on its own emulated host (network
// namespaces; skipped without root).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
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

// The default experiment's MLP on Fashion-MNIST, dynamic sharding, with
// `extra` appended (YAML lines). Async and ssp apply every worker's gradient:
// a smaller step (as configs/fashion_mnist_mlp_async.yaml).
std::string ElasticConfig(int workers, const std::string& consistency, const std::string& extra,
                          const std::string& train = "batch_size_per_device: 64, epochs: 3") {
  const char* learning_rate = consistency == "sync" ? "0.05" : "0.02";
  std::vector<std::string> hosts;
  for (int w = 0; w < workers; ++w) hosts.push_back(absl::StrCat("\"localhost:", 3000 + w, "\""));
  return absl::StrCat(R"(cluster: {ps_hosts: ["localhost:2998", "localhost:2999"], worker_hosts: [)",
                      absl::StrJoin(hosts, ", "), R"(]}
model: {name: mlp, hidden_units: [128, 32]}
data: {source: fashion_mnist, path: ")",
                      kFashionMnist, R"(", sharding: dynamic, chunk_batches: 4}
optimizer: {name: momentum, learning_rate: )",
                      learning_rate, R"(, lr_schedule: cosine, momentum: 0.9}
train: {)",
                      train, R"(, display_every: 50}
variable_update: parameter_server
transport: grpc
consistency: )",
                      consistency, "\n", extra);
}

class ElasticTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(absl::StrCat(kFashionMnist, "/train-images-idx3-ubyte.gz"))) {
      GTEST_SKIP() << "Fashion-MNIST is not installed (Debian's dataset-fashion-mnist)";
    }
  }

  // Runs pstrain-launch on `yaml`; once `ready` appears in its output, calls
  // `during` (given the run directory); waits for the end.
  struct Run {
    std::optional<int> status;
    std::string output;
    absl::StatusOr<RunResult> result = absl::UnknownError("not run");
  };
  Run Launch(const std::string& name, const std::string& yaml, const std::string& ready,
             const std::function<void(const std::string& run_dir)>& during) {
    const std::string config = dir_.path() + "/" + name + ".yaml";
    const std::string run_dir = dir_.path() + "/" + name;
    WriteFile(config, yaml);
    Subprocess launch =
        Spawn({BinDir() + "/pstrain-launch", config, "--run_dir", run_dir, "--timeout_s", "400"}, dir_.path());
    Run run;
    if (WaitUntil([&] { return absl::StrContains(launch.out(), ready); }, seconds(120))) {
      during(run_dir);
    } else {
      ADD_FAILURE() << "never saw '" << ready << "':\n" << launch.out() << launch.err();
    }
    run.status = WaitForExit(launch.pid, seconds(420));
    run.output = launch.out() + launch.err();
    run.result = ReadResultJson(run_dir + "/result.json");
    return run;
  }

  static void Signal(const std::string& run_dir, int worker, int signal) {
    const std::vector<pid_t> pids = FindProcesses({"pstrain-worker", absl::StrCat("--index=", worker), run_dir});
    ASSERT_EQ(pids.size(), 1u) << "worker " << worker;
    ASSERT_EQ(kill(pids[0], signal), 0);
  }

  // Kills worker 2 of 3 once it printed step `at`; the others finish.
  void KillWorkerTwoAndFinish(const std::string& name, const std::string& consistency, const std::string& extra,
                              int at = 100) {
    // on_worker_lost continue: the launcher lets the others finish (and a
    // sync PS goes on without the lost worker).
    const std::string elastic =
        absl::StrCat("elastic: {on_worker_lost: continue}\n", consistency == "ssp" ? "staleness: 2\n" : "");
    const Run run = Launch(
        name,
        ElasticConfig(3, consistency,
                      absl::StrCat(elastic, "timeouts: {heartbeat_seconds: 0.5, worker_lost_seconds: 3}\n", extra)),
        absl::StrCat("[worker2] ", at, "\timages/sec"),
        [](const std::string& run_dir) { Signal(run_dir, 2, SIGKILL); });
    ASSERT_TRUE(run.status && WIFEXITED(*run.status) && WEXITSTATUS(*run.status) == 0) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "launch: worker2 was killed by signal 9")) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "the run goes on without it")) << run.output;
    ASSERT_TRUE(run.result.ok()) << run.result.status() << "\n" << run.output;
    // Measured 0.859 sync, 0.855 async, 0.860 ssp (kill at step 100).
    EXPECT_GE(run.result->test_accuracy(), consistency == "sync" ? 0.85 : 0.83) << run.output;
    EXPECT_TRUE(HasChange(*run.result, 2, "lost")) << run.output;
    const LedgerReport& ledger = run.result->data_ledger();
    ExpectEveryExampleOnce(ledger);
    // Worker 2 held a chunk when it died: another worker trained it.
    EXPECT_GE(ledger.chunks_reassigned(), 1) << run.output;
    std::cout << "ledger: " << ledger.ShortDebugString() << std::endl;
  }

  TempDir dir_;
};

// kill -9 of worker 2, never restarted: every epoch, the last included, is
// trained once, under every consistency mode.
TEST_F(ElasticTest, SyncRunLosesAWorkerAndStillTrainsEveryExampleOnce) {
  KillWorkerTwoAndFinish("lose_worker", "sync", "");
}

TEST_F(ElasticTest, AsyncRunLosesAWorkerAndStillTrainsEveryExampleOnce) {
  KillWorkerTwoAndFinish("lose_worker_async", "async", "");
}

TEST_F(ElasticTest, SspRunLosesAWorkerAndStillTrainsEveryExampleOnce) {
  KillWorkerTwoAndFinish("lose_worker_ssp", "ssp", "");
}

// Late in the run the others may run out of free chunks while the lost
// worker's is not back yet: they wait for it (paused) instead of ending.
TEST_F(ElasticTest, SyncRunLosesAWorkerNearTheEndAndStillTrainsTheLastEpoch) {
  KillWorkerTwoAndFinish("lose_worker_late", "sync", "", /*at=*/900);
}

TEST_F(ElasticTest, SyncRunLosesAWorkerBetweenEmulatedHosts) {
  if (absl::Status s = launch::CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
  KillWorkerTwoAndFinish("lose_worker_hosts", "sync", "emulation: {workers_per_host: 1}\n");
}

// Must-show 4: an async worker stopped for 10 s, twice: the others read
// more, and nothing is skipped or trained twice. The run is long enough
// (768,000 examples, about 25 s here with all three workers) for the worker
// to be running again between its stops.
TEST_F(ElasticTest, AsyncWorkerStoppedTwiceSkipsAndDoublesNothing) {
  const Run run = Launch("stopped_worker",
                         ElasticConfig(3, "async", "timeouts: {heartbeat_seconds: 0.5, worker_lost_seconds: 30}\n",
                                       "batch_size_per_device: 32, steps: 8000"),
                         "[worker1] 50\timages/sec", [](const std::string& run_dir) {
                           for (int round = 0; round < 2; ++round) {
                             Signal(run_dir, 1, SIGSTOP);
                             std::this_thread::sleep_for(seconds(10));
                             Signal(run_dir, 1, SIGCONT);
                             std::this_thread::sleep_for(seconds(1));
                           }
                         });
  ASSERT_TRUE(run.status && WIFEXITED(*run.status) && WEXITSTATUS(*run.status) == 0) << run.output;
  ASSERT_TRUE(run.result.ok()) << run.result.status();
  const LedgerReport& ledger = run.result->data_ledger();
  ExpectEveryExampleOnce(ledger, /*whole_epochs=*/false);  // train.steps
  // The stopped worker read less than the others.
  ASSERT_EQ(ledger.examples_by_worker_size(), 3);
  EXPECT_LT(ledger.examples_by_worker(1), ledger.examples_by_worker(0)) << ledger.ShortDebugString();
  EXPECT_LT(ledger.examples_by_worker(1), ledger.examples_by_worker(2)) << ledger.ShortDebugString();
  std::cout << "ledger: " << ledger.ShortDebugString() << std::endl;
}

// Must-show 2: 4 workers listed, 3 needed; the fourth starts mid-run and
// joins. The run is short (703 steps, 7-15 s) and the fourth worker's
// start-up (about 1.6 s of CPU: the data set, the model, channels) took from
// 3.6 s to over 10 s beside other tests, so a fixed deadline failed both
// ways (no join within 10 s; a join after every chunk was handed out). The
// three stop (SIGSTOP) at the chief's step 50 while the fourth starts, and go
// on once it has joined: the join is at a step under way, on any machine.
// They are silent meanwhile, so worker_lost_seconds is well above that.
TEST_F(ElasticTest, AFourthWorkerJoinsARunUnderWay) {
  const std::string config = dir_.path() + "/join.yaml";
  const std::string run_dir = dir_.path() + "/join";
  WriteFile(config, ElasticConfig(4, "sync",
                                  "elastic: {min_workers: 3}\n"
                                  "timeouts: {heartbeat_seconds: 0.5, worker_lost_seconds: 120}\n"));
  const std::string ps_hosts = FreeLoopbackHosts(2), worker_hosts = FreeLoopbackHosts(4);
  auto start = [&](const std::string& binary, int index) {
    const std::string capture = dir_.path() + "/" + binary + std::to_string(index);
    std::filesystem::create_directories(capture);
    return Spawn({BinDir() + "/" + binary, "--config=" + config, absl::StrCat("--index=", index),
                  "--ps_hosts=" + ps_hosts, "--worker_hosts=" + worker_hosts, "--run_dir=" + run_dir},
                 capture);
  };
  std::vector<Subprocess> roles;
  for (int s = 0; s < 2; ++s) roles.push_back(start("pstrain-ps", s));
  for (int w = 0; w < 3; ++w) roles.push_back(start("pstrain-worker", w));
  Subprocess& chief = roles[2];
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(chief.out(), "\n50\t"); }, seconds(120)))
      << chief.out() << chief.err();
  for (int w = 2; w < 5; ++w) kill(roles[w].pid, SIGSTOP);
  const std::string before = chief.out();
  const auto started = std::chrono::steady_clock::now();
  Subprocess joiner = start("pstrain-worker", 3);
  const bool joined =
      WaitUntil([&] { return absl::StrContains(joiner.out(), "joining the run at step") || !ProcessAlive(joiner.pid); },
                seconds(90));
  for (int w = 2; w < 5; ++w) kill(roles[w].pid, SIGCONT);
  ASSERT_TRUE(joined && absl::StrContains(joiner.out(), "joining the run at step")) << joiner.out() << joiner.err();
  std::cout << "worker 3 joined after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count()
            << " ms\nthe chief's progress before the join:\n"
            << before.substr(before.rfind("\n50\t") + 1) << std::endl;
  for (Subprocess* p : {&roles[2], &roles[3], &roles[4], &joiner}) {
    std::optional<int> status = WaitForExit(p->pid, seconds(300));
    ASSERT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << p->out() << p->err();
  }
  std::cout << "the chief's progress after the join:\n" << chief.out().substr(before.size()) << std::endl;
  for (int s = 0; s < 2; ++s) WaitForExit(roles[s].pid, seconds(30));
  absl::StatusOr<RunResult> result = ReadResultJson(run_dir + "/result.json");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE(result->test_accuracy(), 0.85);
  EXPECT_TRUE(HasChange(*result, 3, "joined")) << result->ShortDebugString();
  EXPECT_EQ(result->workers_size(), 4);
  ExpectEveryExampleOnce(result->data_ledger());
  EXPECT_GT(result->data_ledger().examples_by_worker(3), 0);
}

// The audit across a resume: a sync run killed whole part-way (the launcher
// and with it every role) and started again over its checkpoints. The
// resumed run's ledger holds the chunks its checkpoint had completed and
// trains the rest: every epoch once. With chunk_batches 1 a restore trains
// nothing twice (a chunk part-way through at the checkpoint starts over).
TEST_F(ElasticTest, ARunResumedFromACheckpointTrainsEveryExampleOnce) {
  const std::string yaml = absl::StrReplaceAll(
      ElasticConfig(3, "sync", absl::StrCat("checkpoint: {dir: \"", dir_.path(), "/ckpt\", every_steps: 50}\n")),
      {{"chunk_batches: 4", "chunk_batches: 1"}});
  const Run first = Launch("resume_first", yaml, "[worker0] 300\timages/sec", [](const std::string& run_dir) {
    const std::vector<pid_t> launcher = FindProcesses({"pstrain-launch", run_dir});
    ASSERT_EQ(launcher.size(), 1u);
    ASSERT_EQ(kill(launcher[0], SIGKILL), 0);
  });
  ASSERT_FALSE(first.result.ok()) << "the first run was to be killed before its end";
  const Run second = Launch("resume_second", yaml, "Resuming from checkpoint", [](const std::string&) {});
  ASSERT_TRUE(second.status && WIFEXITED(*second.status) && WEXITSTATUS(*second.status) == 0) << second.output;
  ASSERT_TRUE(second.result.ok()) << second.result.status() << second.output;
  const LedgerReport& ledger = second.result->data_ledger();
  std::cout << "ledger: " << ledger.ShortDebugString() << std::endl;
  int64_t done = 0, trained_now = 0;
  for (int e = 0; e < ledger.examples_done_size(); ++e) {
    EXPECT_EQ(ledger.examples_done(e), ledger.examples_per_epoch()) << "epoch " << e;
    done += ledger.examples_done(e);
  }
  EXPECT_EQ(done, ledger.total_examples());
  for (int64_t n : ledger.examples_by_worker()) trained_now += n;
  // The first run's checkpointed chunks count once, and not again now.
  EXPECT_GT(done - trained_now, 0);
  EXPECT_LT(trained_now, done);
  EXPECT_EQ(ledger.completions_refused(), 0);
  EXPECT_GE(second.result->test_accuracy(), 0.85) << second.output;
}

}  // namespace
}  // namespace pstrain::test
