// After every change of an elastic all-reduce group, training equals a fresh
// run of the new group from the same state (issue must-show: "training
// equals a fresh run of the new group from the same state").
//
// The run: 4 of 5 listed workers start (0 and 1 threads of this process,
// 2 and 3 pstrain-worker processes). Worker 3 is stopped (SIGSTOP): the group
// stalls at its all-reduce, the others' operations time out, and they go on
// as [0,1,2]; then worker 2 is stopped the same way while worker 4 (a thread)
// starts, and the group goes on as [0,1,4], worker 4 taking the state of a
// member. The stopped processes are then killed.
//
// The reference replays the run on its own, from the same initial values and
// the same data stream: each step the group's members' slices are trained by
// replicas of the model, their gradients averaged and the same optimizer
// applied, with the group's size at that step as the chief's result.json
// records it (each loss and join after its step). A joiner that took the
// wrong variables or optimizer slots, a member left with the wrong step or
// data position, or a group that averaged over the wrong size would leave the
// chief's final parameters away from the replay.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/config_loader.h"
#include "common/data/batcher.h"
#include "common/data/data_source.h"
#include "common/transport/transport.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/util/process_test_util.h"
#include "tests/worker/equivalence_util.h"
#include "worker/local_optimizer.h"
#include "worker/replica_set.h"
#include "worker/run/trainer.h"

namespace pstrain::test {
namespace {

using std::chrono::seconds;

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";
constexpr int kListed = 5;
constexpr int kBatch = 32;

std::string Config(const std::string& worker_hosts) {
  std::vector<std::string> hosts;
  for (int w = 0; w < kListed; ++w) hosts.push_back(absl::StrCat("\"", NthHost(worker_hosts, w), "\""));
  return absl::StrCat("name: elastic_equivalence\ncluster: {worker_hosts: [", absl::StrJoin(hosts, ", "), R"(]}
model: {name: mlp, hidden_units: [32, 16]}
data: {source: fashion_mnist, path: ")",
                      kFashionMnist, R"(", sharding: dynamic}
optimizer: {name: momentum, learning_rate: 0.05, momentum: 0.9}
train: {batch_size_per_device: )",
                      kBatch, R"(, steps: 300, warmup_steps: 0, evaluate: false, display_every: 10}
variable_update: allreduce
transport: grpc
elastic: {min_workers: 3, on_worker_lost: continue, regroup_seconds: 3}
timeouts: {sync_step_seconds: 3}
)");
}

// The group's size after each step, from the chief's membership record.
std::map<int64_t, int> SizeChanges(const RunResult& result) {
  std::map<int64_t, int> delta;
  for (const MembershipChange& c : result.membership()) {
    if (c.change() == "lost") --delta[c.step()];
    if (c.change() == "joined" || c.change() == "rejoined") ++delta[c.step()];
  }
  return delta;
}

// Replays the run on replicas of the model: `size` members from the start,
// changed by `changes` after the steps they name; the last step's group
// keeps only the members that have a slice. Returns the final parameters.
std::vector<std::vector<float>> Replay(const ExperimentConfig& config, int size, std::map<int64_t, int> changes) {
  absl::StatusOr<Datasets> data = LoadDatasets(config, /*with_test=*/false);
  EXPECT_TRUE(data.ok()) << data.status();
  absl::StatusOr<ShardedBatcher> batcher =
      ShardedBatcher::Create(&data->train, 0, 1, kBatch, config.data().shuffle_seed(), config.data().shuffle());
  EXPECT_TRUE(batcher.ok()) << batcher.status();
  ModelConfig model = config.model();
  for (int64_t d : data->train.example_shape) model.add_input_shape(static_cast<int32_t>(d));
  model.set_num_classes(data->train.num_classes);
  absl::StatusOr<std::unique_ptr<ReplicaSet>> replicas = ReplicaSet::Create(model, kListed);
  EXPECT_TRUE(replicas.ok()) << replicas.status();
  (*replicas)->InitializeVariables(config.train().init_seed());
  (*replicas)->BroadcastValues(0);
  absl::StatusOr<std::unique_ptr<LocalOptimizer>> optimizer =
      LocalOptimizer::Create(config.optimizer(), (*replicas)->variables(0), config.train().steps());
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  const int64_t per_epoch = data->train.num_examples / kBatch * kBatch;
  const int64_t total = config.train().steps() * kListed * kBatch;
  std::vector<Tensor> images(kListed);
  std::vector<std::vector<int32_t>> labels(kListed);
  int64_t next = 0;
  for (int64_t step = 0; next < total; ++step) {
    const int members = static_cast<int>(std::min<int64_t>(size, (total - next) / kBatch));
    for (int r = 0; r < members; ++r) {
      const int64_t position = next + int64_t{r} * kBatch;
      EXPECT_TRUE(batcher->FillPositions(position / per_epoch, position % per_epoch, &images[r], &labels[r]).ok());
      (*replicas)->TrainStep(r, images[r], labels[r].data(), nullptr);
    }
    std::vector<Variable>& sum = (*replicas)->variables(0);
    for (int r = 1; r < members; ++r) {
      for (size_t v = 0; v < sum.size(); ++v) {
        float* into = sum[v].grad.data();
        const float* from = (*replicas)->variables(r)[v].grad.data();
        for (int64_t i = 0; i < sum[v].grad.num_elements(); ++i) into[i] += from[i];
      }
    }
    (*optimizer)->Apply(sum, step, 1.0f / static_cast<float>(members));
    (*replicas)->BroadcastValues(0);
    next += int64_t{members} * kBatch;
    if (auto it = changes.find(step); it != changes.end()) size += it->second;
  }
  std::vector<std::vector<float>> parameters;
  for (const Variable& v : (*replicas)->variables(0)) {
    parameters.emplace_back(v.value.data(), v.value.data() + v.value.num_elements());
  }
  return parameters;
}

class ElasticAllReduceEquivalenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(absl::StrCat(kFashionMnist, "/train-images-idx3-ubyte.gz"))) {
      GTEST_SKIP() << "Fashion-MNIST is not installed (Debian's dataset-fashion-mnist)";
    }
  }
  TempDir dir_;
};

TEST_F(ElasticAllReduceEquivalenceTest, TrainingAfterEachChangeEqualsAFreshRunOfTheNewGroup) {
  const std::string worker_hosts = FreeLoopbackHosts(kListed);
  const std::string yaml = Config(worker_hosts);
  const std::string config_path = dir_.path() + "/elastic.yaml";
  WriteFile(config_path, yaml);
  absl::StatusOr<ExperimentConfig> config = LoadExperimentConfig(config_path);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<Transport>> transport = CreateTransport("grpc", TransportOptions());
  ASSERT_TRUE(transport.ok()) << transport.status();

  auto process = [&](int index) {
    const std::string capture = dir_.path() + "/worker" + std::to_string(index);
    std::filesystem::create_directories(capture);
    return Spawn({BinDir() + "/pstrain-worker", "--config=" + config_path, absl::StrCat("--index=", index),
                  "--worker_hosts=" + worker_hosts},
                 capture);
  };
  std::vector<std::vector<float>> final_parameters;
  // One entry per thread, made before they start: each writes only its own.
  std::map<int, absl::StatusOr<RunResult>> results;
  for (int w : {0, 1, 4}) results.emplace(w, absl::UnknownError("not run"));
  auto thread = [&](int index) {
    return std::thread([&, index] {
      WorkerRunOptions options;
      if (index == 0) options.final_parameters = &final_parameters;
      results.at(index) = RunWorker(*config, index, transport->get(), options);
    });
  };
  std::vector<std::thread> threads;
  threads.push_back(thread(0));
  threads.push_back(thread(1));
  Subprocess two = process(2);
  Subprocess three = process(3);

  // Stop worker 3 once it trains; the others go on as [0,1,2].
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(three.out(), "\n10\t"); }, seconds(120)))
      << three.out() << three.err();
  ASSERT_EQ(kill(three.pid, SIGSTOP), 0);
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(two.out(), "continuing at step"); }, seconds(30)))
      << two.out() << two.err();
  // Stop worker 2 as worker 4 starts: the group goes on as [0,1,4].
  ASSERT_EQ(kill(two.pid, SIGSTOP), 0);
  threads.push_back(thread(4));
  for (std::thread& t : threads) t.join();
  for (Subprocess* p : {&two, &three}) {
    kill(p->pid, SIGKILL);
    WaitForExit(p->pid, seconds(10));
  }
  for (int w : {0, 1, 4}) {
    ASSERT_TRUE(results.at(w).ok()) << "worker " << w << ": " << results.at(w).status();
  }
  const RunResult& chief = *results.at(0);
  std::cout << "membership:";
  for (const MembershipChange& c : chief.membership()) {
    std::cout << " worker " << c.worker() << " " << c.change() << " after step " << c.step() << ";";
  }
  std::cout << std::endl;
  int lost = 0, joined = 0;
  for (const MembershipChange& c : chief.membership()) {
    lost += c.change() == "lost";
    joined += c.change() == "joined";
  }
  ASSERT_EQ(lost, 2) << chief.ShortDebugString();
  ASSERT_EQ(joined, 1) << chief.ShortDebugString();
  const std::map<int64_t, int> changes = SizeChanges(chief);

  const std::vector<std::vector<float>> replay = Replay(*config, 4, changes);
  const double difference = MaxRelativeDifference(final_parameters, replay);
  std::cout << "largest relative difference from the replay: " << difference << std::endl;
  EXPECT_LT(difference, 1e-4);
  // A group that kept averaging over 4 after the loss is far from it.
  std::map<int64_t, int> none;
  EXPECT_GT(MaxRelativeDifference(final_parameters, Replay(*config, 4, none)), 10 * difference + 1e-5);
}

}  // namespace
}  // namespace pstrain::test
