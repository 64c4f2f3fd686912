// Replicas with host mirrors (worker/replica_set.h), the path of GPU
// replicas, on CPU replicas whose copies take time (TimedCopyEngine): each
// gradient reaches the strategy's hook in host memory, in backward order, on
// the copy engine's thread while backward goes on, and equal to a plain
// replica's; with UploadValuesOnWait the forward computes on the values the
// waits upload, not on what the device held; the copies show on the
// timeline as lanes.
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "device/timed_copy_engine.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "tests/util/process_test_util.h"
#include "worker/replica_set.h"
#include "worker/timeline.h"

namespace pstrain {
namespace {

constexpr int kBatch = 8;

ModelConfig SmallMlp() {
  ModelConfig config;
  config.set_name("mlp");
  config.add_hidden_units(24);
  config.add_hidden_units(12);
  for (int d : {1, 6, 6}) config.add_input_shape(d);
  config.set_num_classes(5);
  return config;
}

struct Batch {
  Tensor images{{kBatch, 1, 6, 6}};
  std::vector<int32_t> labels;
  Batch() {
    for (int64_t i = 0; i < images.num_elements(); ++i) images.data()[i] = static_cast<float>((i * 7) % 11) / 11;
    for (int n = 0; n < kBatch; ++n) labels.push_back(n % 5);
  }
};

// One mirrored CPU replica whose copies take time; `engine` is set to its
// engine.
std::unique_ptr<ReplicaSet> Mirrored(TimedCopyEngine** engine) {
  ReplicaOptions options;
  options.copy_engine = [engine](DeviceContext&) {
    auto made = std::make_unique<TimedCopyEngine>(TimedCopyEngine::Options{/*gbps=*/2, absl::Milliseconds(2)});
    *engine = made.get();
    return made;
  };
  absl::StatusOr<std::unique_ptr<ReplicaSet>> set = ReplicaSet::Create(SmallMlp(), 1, options);
  CHECK(set.ok()) << set.status();
  return std::move(*set);
}

std::unique_ptr<ReplicaSet> Plain() {
  absl::StatusOr<std::unique_ptr<ReplicaSet>> set = ReplicaSet::Create(SmallMlp(), 1);
  CHECK(set.ok()) << set.status();
  return std::move(*set);
}

std::vector<float> Values(const Tensor& t) { return std::vector<float>(t.data(), t.data() + t.num_elements()); }

TEST(MirroredReplicasTest, EachGradientReachesTheHookInHostMemoryInBackwardOrder) {
  TimedCopyEngine* engine = nullptr;
  std::unique_ptr<ReplicaSet> mirrored = Mirrored(&engine);
  ASSERT_TRUE(mirrored->mirrored());
  std::unique_ptr<ReplicaSet> plain = Plain();
  mirrored->InitializeVariables(5);
  plain->InitializeVariables(5);
  const Batch batch;
  const int variables = static_cast<int>(mirrored->variables(0).size());

  absl::Mutex mu;
  std::vector<int> order;
  std::vector<std::vector<float>> seen(variables);  // each mirror gradient as its hook saw it
  std::vector<std::thread::id> threads;
  const float loss = mirrored->TrainStep(0, batch.images, batch.labels.data(), [&](int v) {
    absl::MutexLock lock(&mu);
    order.push_back(v);
    seen[v] = Values(mirrored->variables(0)[v].grad);
    threads.push_back(std::this_thread::get_id());
  });
  const float plain_loss = plain->TrainStep(0, batch.images, batch.labels.data(), nullptr);
  EXPECT_EQ(loss, plain_loss);

  absl::MutexLock lock(&mu);
  std::vector<int> backward;
  for (int v = variables - 1; v >= 0; --v) backward.push_back(v);
  EXPECT_EQ(order, backward);
  for (int v = 0; v < variables; ++v) {
    EXPECT_EQ(seen[v], Values(plain->variables(0)[v].grad)) << "variable " << v << ": the hook ran before its copy";
  }
  for (const std::thread::id& id : threads) EXPECT_NE(id, std::this_thread::get_id()) << "a hook on backward's thread";
  int downloads = 0;
  for (const TimedCopyEngine::Copy& c : engine->copies()) {
    downloads += c.direction == TimedCopyEngine::Direction::kDownload ? 1 : 0;
  }
  EXPECT_EQ(downloads, variables);
}

TEST(MirroredReplicasTest, WithUploadsOnWaitTheForwardComputesOnTheUploadedValues) {
  TimedCopyEngine* engine = nullptr;
  std::unique_ptr<ReplicaSet> mirrored = Mirrored(&engine);
  std::unique_ptr<ReplicaSet> plain = Plain();
  mirrored->InitializeVariables(5);  // what the device holds
  plain->InitializeVariables(6);
  // The mirrors now hold other values (as pulls bring them): the forward
  // must compute on these.
  const int variables = static_cast<int>(mirrored->variables(0).size());
  for (int v = 0; v < variables; ++v) mirrored->variables(0)[v].value.CopyFrom(plain->variables(0)[v].value);
  mirrored->UploadValuesOnWait();
  ASSERT_TRUE(mirrored->uploads_values_on_wait());
  std::vector<int> waited;
  mirrored->model(0).SetVariableWait([&](int v) {
    waited.push_back(v);
    mirrored->UploadValue(0, v);
  });
  const Batch batch;
  const float loss = mirrored->TrainStep(0, batch.images, batch.labels.data(), nullptr);
  const float plain_loss = plain->TrainStep(0, batch.images, batch.labels.data(), nullptr);
  EXPECT_EQ(loss, plain_loss) << "the forward read values other than the uploaded ones";
  for (int v = 0; v < variables; ++v) {
    EXPECT_EQ(Values(mirrored->variables(0)[v].grad), Values(plain->variables(0)[v].grad)) << "variable " << v;
    EXPECT_EQ(Values(mirrored->device_variables(0)[v].value), Values(plain->variables(0)[v].value));
  }
  std::vector<int> forward;
  for (int v = 0; v < variables; ++v) forward.push_back(v);
  EXPECT_EQ(waited, forward);
  int uploads = 0;
  for (const TimedCopyEngine::Copy& c : engine->copies()) {
    uploads += c.direction == TimedCopyEngine::Direction::kUpload ? 1 : 0;
  }
  EXPECT_EQ(uploads, variables) << "one upload per variable, by the waits only";
}

TEST(MirroredReplicasTest, EachCopyIsAnEventOnItsLaneOfTheTimeline) {
  test::TempDir dir;
  ExperimentConfig config;
  config.mutable_timeline()->set_path(dir.path() + "/trace.json");
  config.mutable_timeline()->set_start_step(0);  // trace from the first step on
  absl::StatusOr<std::unique_ptr<Timeline>> timeline = Timeline::Create(config, 0);
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  TimedCopyEngine* engine = nullptr;
  std::unique_ptr<ReplicaSet> mirrored = Mirrored(&engine);
  mirrored->InitializeVariables(5);
  mirrored->SetTimeline(timeline->get());
  mirrored->UploadValuesOnWait();
  mirrored->model(0).SetVariableWait([&](int v) { mirrored->UploadValue(0, v); });
  const Batch batch;
  mirrored->TrainStep(0, batch.images, batch.labels.data(), [](int) {});
  ASSERT_TRUE((*timeline)->Flush().ok());
  const std::string trace = test::ReadFile(dir.path() + "/trace.json");
  EXPECT_TRUE(absl::StrContains(trace, R"("download 0")")) << trace;
  EXPECT_TRUE(absl::StrContains(trace, R"("upload 0")")) << trace;
  for (const Variable& v : mirrored->variables(0)) {
    const std::string event = absl::StrCat(R"("name": ")", v.name, R"(")");
    // One upload and one download of each variable.
    size_t count = 0;
    for (size_t at = trace.find(event); at != std::string::npos; at = trace.find(event, at + 1)) ++count;
    EXPECT_EQ(count, 2u) << v.name << " in\n" << trace;
  }
}

}  // namespace
}  // namespace pstrain
